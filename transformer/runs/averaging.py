"""Checkpoint averaging: the element-wise mean of several checkpoints' weights, saved as one checkpoint.

Run folders give their step checkpoints (`RunFolder.steps`: those that
`trainer.keep_last`/`trainer.keep_best` kept); files are taken as they are. The
newest (`last`) or best by val BLEU (`best`) N of them are averaged, or all.
"""

import math
from pathlib import Path

import torch

from transformer.core.errors import UserError
from transformer.runs.checkpoint import Checkpoint, load_checkpoint, read_metadata, save_checkpoint
from transformer.runs.run_folder import RunFolder


def candidates(paths: list[str]) -> list[Path]:
    """The checkpoint files named by `paths`: a run folder's step checkpoints, or a file itself."""
    files = []
    for path in map(Path, paths):
        if path.is_dir():
            run = RunFolder(path)
            steps = run.steps()
            if not steps:
                raise UserError(
                    f"no step checkpoints in {run.checkpoints}; give a run folder of transformer-train "
                    "(trainer.keep_last > 0) or .safetensors files"
                )
            files += steps
        elif path.exists():
            files.append(path)
        else:
            raise UserError(f"checkpoint {path} does not exist")
    if not files:
        raise UserError("checkpoints=[] names nothing: give run folders and/or .safetensors files")
    return list(dict.fromkeys(f.resolve() for f in files))


def _bleu(meta: dict[str, str]) -> float:
    """A checkpoint's val BLEU; -inf when it was not validated."""
    value = float(meta.get("val_bleu") or "nan")
    return -math.inf if math.isnan(value) else value


def select(files: list[Path], last: int, best: int) -> list[Path]:
    """The `last` newest or `best` best (by val BLEU) of `files`, or all of them; in step order."""
    if last < 0 or best < 0 or (last and best):
        raise UserError(f"last={last} best={best}: give last=N or best=N (N >= 1), or neither to average them all")
    meta = {f: read_metadata(f) for f in files}
    step = {f: int(meta[f].get("step", 0)) for f in files}
    if last:
        files = sorted(files, key=step.get)[-last:]
    elif best:
        files = sorted(files, key=lambda f: _bleu(meta[f]), reverse=True)[:best]
    return sorted(files, key=step.get)


def _same_model(first: Checkpoint, ckpt: Checkpoint) -> bool:
    a, b = first.model.state_dict(), ckpt.model.state_dict()
    same_shapes = a.keys() == b.keys() and all(a[name].shape == b[name].shape for name in a)
    return same_shapes and (first.tokenizer.src_model, first.tokenizer.tgt_model) == (
        ckpt.tokenizer.src_model,
        ckpt.tokenizer.tgt_model,
    )


def average(files: list[Path], output: Path) -> str:
    """Write the mean of the checkpoints' weights, with the last one's config, tokenizer and progress (`files` in
    step order), to `output` atomically; returns the averaged steps, e.g. "4,6"."""
    total: dict[str, torch.Tensor] = {}
    first, steps = None, []
    for file in files:
        ckpt = load_checkpoint(str(file))
        first = first or ckpt
        if not _same_model(first, ckpt):
            raise UserError(f"cannot average {first.path} and {ckpt.path}: not the same model and vocabulary")
        for name, t in ckpt.model.state_dict().items():
            total[name] = total.get(name, 0) + t.double()
        steps.append(ckpt.meta.get("step", "?"))
    ckpt.model.load_state_dict({name: (t / len(files)).to(torch.float32) for name, t in total.items()})
    progress = {k: ckpt.meta[k] for k in ("step", "epoch", "train_minutes") if k in ckpt.meta}
    save_checkpoint(output, ckpt.model, ckpt.tokenizer, ckpt.config, averaged=",".join(steps), **progress)
    return ",".join(steps)
