"""What the four console scripts share: the config location, override checking and one-line user errors."""

import contextlib
import dataclasses
import difflib
import functools
import sys
import typing
from collections.abc import Callable, Iterator
from pathlib import Path

import hydra
from omegaconf import DictConfig

from transformer.config import register_configs
from transformer.errors import UserError

CONFIG_PATH = str(Path(__file__).resolve().parent.parent / "configs")

register_configs()


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn a `UserError` into one line on stderr and exit status 2."""
    try:
        yield
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def _dataclass_of(annotation) -> type | None:
    """The dataclass inside an annotation such as `SplitFiles | None`, if any."""
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


def hydra_app(config_name: str, schema: type) -> Callable[[Callable[[DictConfig], None]], Callable[[], None]]:
    """Make a console-script entry point: check the overrides against `schema`, then run the Hydra app."""

    def wrap(run: Callable[[DictConfig], None]) -> Callable[[], None]:
        app = hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name=config_name)(run)

        @functools.wraps(run)
        def main() -> None:
            with user_errors():
                for override in sys.argv[1:]:
                    check_override(schema, override)
            app()

        return main

    return wrap
