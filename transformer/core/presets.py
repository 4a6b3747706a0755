"""The presets in `configs/`: one option of a config group (`configs/decoding/beam.yaml`, `configs/model/small.yaml`)
composed through Hydra's compose API into its typed config, for the code that reads a preset outside a Hydra app
(the results table, the benchmarks' model sizes, the recipe's choices).

A preset is composed as `+GROUP=NAME` over the schema the commands give that group (`TrainConfig`'s field of that
name), so it reads exactly as `GROUP=NAME` does on a command line; nothing opens a YAML file by its path.
"""

import contextlib
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from transformer.core.config import TrainConfig
from transformer.core.errors import UserError

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "configs")
SCHEMAS: dict[str, type] = typing.get_type_hints(TrainConfig)  # group -> its typed config: data, model, decoding, ...


@contextlib.contextmanager
def _hydra() -> Iterator[None]:
    """Hydra on `configs/`: the running app's (whose config dir it is), else initialized for the call."""
    if GlobalHydra.instance().is_initialized():
        yield
        return
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        yield


def names(group: str) -> list[str]:
    """The presets of a config group, sorted: `names("decoding")` -> ["beam", "greedy", "sample"]."""
    with _hydra():
        return sorted(GlobalHydra.instance().config_loader().get_group_options(group))


def compose(group: str, name: str, overrides: list[str] | tuple[str, ...] = ()) -> Any:
    """The preset `configs/GROUP/NAME.yaml` over its schema's defaults, with `overrides` (KEY=VALUE inside the group),
    as that schema's dataclass; a `UserError` names what is wrong (an unknown preset, key or value)."""
    known = names(group)
    if name not in known:
        raise UserError(f"{name!r} names no preset in configs/{group} ({', '.join(known)})")
    try:
        with _hydra():
            cfg = hydra_compose(overrides=[f"+{group}={name}"])
        settings = OmegaConf.from_dotlist(list(overrides))
        merged = OmegaConf.merge(OmegaConf.structured(SCHEMAS[group]), cfg[group], settings)
        return OmegaConf.to_object(merged)
    except (HydraException, OmegaConfBaseException) as err:
        raise UserError(f"{group}={name} {','.join(overrides)}: {str(err).splitlines()[0]}") from None
