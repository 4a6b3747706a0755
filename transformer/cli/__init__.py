"""What the console scripts share: the config location, override checking and one-line user errors.

The console scripts import torch, datasets and what needs them inside `main`, after the settings were checked, so
that `--help` and a mistaken setting answer without them (seconds sooner; tests/cli/test_entry_points.py keeps it so).
"""

import contextlib
import dataclasses
import difflib
import functools
import sys
import typing
from collections.abc import Callable, Iterator

import hydra
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException, OverrideParseException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from transformer.cli.checks import check_config
from transformer.core import config, presets
from transformer.core.errors import UserError

CONFIG_PATH = presets.CONFIG_DIR

SCHEMAS = {
    "prepare_schema": config.PrepareConfig,
    "train_schema": config.TrainConfig,
    "evaluate_schema": config.EvaluateConfig,
    "translate_schema": config.TranslateConfig,
    "score_schema": config.ScoreConfig,
    "serve_schema": config.ServeConfig,
    "export_schema": config.ExportConfig,
    "average_schema": config.AverageConfig,
    "results_schema": config.ResultsConfig,
    "backtranslate_schema": config.BacktranslateConfig,
    "recipe_schema": config.RecipeConfig,
}  # the YAML files name these in their defaults lists


def register_schemas() -> None:
    """Register the schemas with Hydra, so YAML files and overrides are checked against them."""
    for name, schema in SCHEMAS.items():
        ConfigStore.instance().store(name=name, node=schema)


register_schemas()


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn a `UserError` into one line on stderr and exit status 2."""
    try:
        yield
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def _dataclass_of(annotation) -> type | None:
    """The dataclass inside an annotation such as `SourceConfig | None`, if any."""
    candidates = (annotation, *typing.get_args(annotation))
    return next((c for c in candidates if dataclasses.is_dataclass(c)), None)


def _settings(schema: type, prefix: str = "") -> Iterator[str]:
    """Every dotted setting name below `schema`."""
    for name, annotation in typing.get_type_hints(schema).items():
        inner = _dataclass_of(annotation)
        yield from _settings(inner, f"{prefix}{name}.") if inner else [f"{prefix}{name}"]


def check_override(schema: type, override: str) -> None:
    """Reject `a.b=value` when `a.b` is no setting of `schema`, naming the valid keys (Hydra names none)."""
    if override.startswith(("-", "+", "~", "hydra.", "hydra/")) or "=" not in override:
        return
    key = override.split("=", 1)[0]
    node, path = schema, []
    for part in key.split("."):
        fields = typing.get_type_hints(node)
        if part not in fields:
            where = ".".join(path) or "the top level"
            close = [".".join([*path, c]) for c in difflib.get_close_matches(part, fields, n=1)]
            close = close or [k for k in _settings(schema) if k.endswith(f".{part}")]
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise UserError(
                f"unknown setting {key}: {hint}valid keys of {where}: {', '.join(sorted(fields))} "
                f"(to add a new key on purpose: +{key}=...)"
            )
        path.append(part)
        node = _dataclass_of(fields[part])
        if node is None:  # a value or a free-form mapping: nothing deeper to check
            return


OMEGACONF_DETAILS = ("full_key:", "reference_type=", "object_type=")


def _one_line(err: BaseException) -> str:
    """An exception and its causes as one line (Hydra's messages span several)."""
    parts = []
    while err is not None:
        lines = [line.strip() for line in str(err).splitlines()]
        text = " ".join(line for line in lines if line and not line.startswith(OMEGACONF_DETAILS))
        if text and text not in parts:
            parts.append(text)
        err = err.__cause__
    return ": ".join(parts)


def _unset_section(config_name: str, overrides: list[str]) -> UserError:
    """The error for an override `a.b.c=value` whose section `a.b` is null in the composed config."""
    for override in overrides:
        key = override.split("=", 1)[0]
        if override.startswith(("+", "~")) or "." not in key:
            continue
        others = [o for o in overrides if o != override]
        with hydra.initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
            cfg = hydra.compose(config_name, overrides=others)
        parts = key.split(".")
        for end in range(1, len(parts) + 1):
            section = ".".join(parts[:end])
            if OmegaConf.select(cfg, section, default="absent") is None:
                hint = " (your own corpus: data=files, see configs/data/files.yaml)" if parts[0] == "data" else ""
                return UserError(f"cannot set {key}: {section} is not set in this config{hint}")
    return UserError(f"cannot apply the overrides {' '.join(overrides)} (see --help)")


def compose_checked(config_name: str, overrides: list[str]) -> DictConfig:
    """Compose the config as the app will, and check every setting before Hydra starts the job."""
    try:
        with hydra.initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
            cfg = hydra.compose(config_name, overrides=overrides)
        missing = sorted(OmegaConf.missing_keys(cfg))
    except OverrideParseException as err:
        raise UserError(
            f"cannot parse {err.override!r} ({_one_line(err).split(' See https')[0]}); put a value with spaces or "
            """punctuation in quotes inside the shell's quotes, e.g. 'sentences=["Bonjour !","Un homme lit."]'"""
        ) from None
    except (HydraException, OmegaConfBaseException) as err:
        raise UserError(f"{_one_line(err).split(' Config search path')[0]} (see --help)") from None
    except (AssertionError, AttributeError):  # OmegaConf's answer to a setting below a null section
        raise _unset_section(config_name, overrides) from None
    if missing:
        raise UserError(f"missing required setting {', '.join(missing)}: give {missing[0]}=... on the command line")
    check_config(cfg)
    return cfg


def hydra_app(
    config_name: str, schema: type, before: Callable[[DictConfig, list[str]], None] | None = None
) -> Callable[[Callable[[DictConfig], None]], Callable[[], None]]:
    """Make a console-script entry point: check the overrides against `schema`, compose and check the whole
    config (then `before(cfg, overrides)`, e.g. to lock a folder), then run the Hydra app; `check_config` runs
    once per command (per job under Hydra's -m)."""

    def wrap(run: Callable[[DictConfig], None]) -> Callable[[], None]:
        checked = False  # whether this command's config was checked before Hydra started

        @functools.wraps(run)  # Hydra names the job after the function it unwraps
        def job(cfg: DictConfig) -> None:
            if not checked:  # Hydra's own modes (-m): each job's config is checked here instead
                with user_errors():
                    check_config(cfg)
            run(cfg)

        app = hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name=config_name)(job)

        @functools.wraps(run)
        def main() -> None:
            nonlocal checked
            overrides = sys.argv[1:]
            checked = not any(arg.startswith("-") for arg in overrides)  # --help, --cfg, -m: Hydra's own modes
            with user_errors():
                for override in overrides:
                    check_override(schema, override)
                if checked:
                    cfg = compose_checked(config_name, overrides)
                    if before is not None:
                        before(cfg, overrides)
            app()

        return main

    return wrap
