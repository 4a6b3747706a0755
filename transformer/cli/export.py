"""`transformer-export`: a checkpoint as a CTranslate2 or Hugging Face MarianMT folder.

Everything is written to a hidden folder beside `output` and renamed at the
end, so a refusal or a crash leaves nothing behind (and what a kill left, the next export removes).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from transformer.cli import hydra_app, user_errors
from transformer.core.config import ExportConfig, ExportFormat, Quantization, choices
from transformer.core.errors import UserError
from transformer.core.files import folder_beside
from transformer.core.precision import FLOAT32_WEIGHTS

if TYPE_CHECKING:
    from transformer.runs.checkpoint import Checkpoint

log = logging.getLogger(__name__)


def check_export(cfg: DictConfig) -> Path:
    """Refuse bad settings and an occupied output folder before any work; returns the output folder."""
    if cfg.format not in choices(ExportFormat):
        raise UserError(f"format={cfg.format!r} is not one of {', '.join(choices(ExportFormat))}")
    if cfg.export.quantization not in choices(Quantization):
        quantizations = ", ".join(choices(Quantization))
        raise UserError(f"export.quantization={cfg.export.quantization!r} is not one of {quantizations}")
    if cfg.format == "marian" and cfg.export.quantization != FLOAT32_WEIGHTS:
        raise UserError("export.quantization is for format=ctranslate2; a MarianMT folder holds float32 weights")
    output = Path(cfg.output)
    if output.exists() and not output.is_dir():
        raise UserError(f"output={output} is a file, not a folder")
    if output.is_dir() and any(output.iterdir()) and not cfg.export.force:
        raise UserError(f"output={output} exists and is not empty; choose another folder or set export.force=true")
    return output


def _writer(fmt: ExportFormat, quantization: Quantization):
    """`write(ckpt, directory, name)` for `fmt`, or a UserError naming the missing optional package."""
    try:
        if fmt == "ctranslate2":
            from transformer.export.ctranslate2 import export_ctranslate2

            return functools.partial(export_ctranslate2, quantization=quantization)
        from transformer.export.marian import export_marian

        return export_marian
    except ImportError as err:
        package = "ctranslate2" if fmt == "ctranslate2" else "transformers"
        raise UserError(f"format={fmt} needs the {package} package ({err}): pip install -e '.[export]'") from err


def check_exportable(model_cfg: DictConfig) -> None:
    """Refuse a model that neither format can hold: an RNN, or attention other than scaled dot-product."""
    family = model_cfg.get("family", "transformer")
    if family != "transformer":
        raise UserError(f"model.family={family}: CTranslate2 and MarianMT hold Transformers only")
    uses = model_cfg.get("attention") or {"encoder": "dot", "decoder": "dot", "cross": "dot"}
    other = [f"model.attention.{use}={uses[use]}" for use in ("encoder", "decoder", "cross") if uses.get(use) != "dot"]
    if other:
        raise UserError(f"{', '.join(other)}: the export formats have scaled dot-product attention only (dot)")


def export(ckpt: Checkpoint, fmt: str, output: Path, quantization: str = "none", force: bool = False) -> None:
    """Write `ckpt` to `output` in format `fmt`, through a temporary folder renamed at the end."""
    check_exportable(ckpt.config.model)
    write = _writer(fmt, quantization)
    output = output.resolve()
    with folder_beside(output) as tmp:
        folder = tmp / output.name
        folder.mkdir()
        write(ckpt, folder, output.name)
        if output.exists() and force:
            shutil.rmtree(output)
        elif output.exists():
            output.rmdir()  # empty: checked before
        os.replace(folder, output)


@hydra_app("export", ExportConfig)
def main(cfg: DictConfig) -> None:
    from transformer.runs.loading import load  # torch: see transformer.cli

    with user_errors():
        output = check_export(cfg)
        ckpt = load(cfg.checkpoint, device="cpu").members[0]
        export(ckpt, cfg.format, output, cfg.export.quantization, cfg.export.force)
        log.info("%s export of %s written to %s", cfg.format, ckpt.path, output)
        print(output)


if __name__ == "__main__":
    main()
