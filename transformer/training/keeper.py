"""The checkpoints of a run: step checkpoints pruned to the newest and the best, `best`, and the resumable `last`."""

import logging
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch import nn

from transformer.core.errors import UserError
from transformer.data.tokenizer import Tokenizer
from transformer.runs.checkpoint import load_checkpoint, resolve_checkpoint, save_checkpoint
from transformer.runs.run_folder import RunFolder
from transformer.runs.training_state import load_optimizer_state, optimizer_state, rng_state, set_rng_state
from transformer.training.progress import TrainingProgress

log = logging.getLogger(__name__)


def prune_steps(run: RunFolder, history: list[list], keep_last: int, keep_best: int) -> list[list]:
    """Delete step checkpoints that are neither among the `keep_last` newest nor the `keep_best` best.

    `history` lists [step, val_bleu] of the step checkpoints on disk; returns the kept ones.
    """
    newest = sorted(history, key=lambda h: h[0])[-keep_last:] if keep_last > 0 else []
    best = sorted(history, key=lambda h: (-h[1], -h[0]))[:keep_best] if keep_best > 0 else []
    kept = {h[0] for h in newest + best}
    for step, _ in history:
        if step not in kept:
            run.step(step).unlink(missing_ok=True)
    return [h for h in history if h[0] in kept]


def resume_file(run_dir: Path, resume: str) -> Path:
    """The checkpoint `trainer.resume` names: this run's last one ("true"), a run directory's, or a file."""
    source = run_dir if resume.lower() == "true" else Path(resume)
    file = RunFolder(source).last if source.is_dir() else resolve_checkpoint(str(source))
    if not file.exists():
        raise UserError(f"nothing to resume: {file} does not exist (train without trainer.resume first)")
    return file


class CheckpointKeeper:
    """Writes one run's checkpoints into its run folder and restores a resumable one."""

    def __init__(
        self,
        run: RunFolder,
        model: nn.Module,
        tokenizer: Tokenizer,
        cfg: DictConfig,
        *,
        keep_last: int,
        keep_best: int,
    ):
        """`cfg` is the run's whole config, saved in every checkpoint; `keep_last`/`keep_best` prune the step ones."""
        self.run, self.model, self.tokenizer, self.cfg = run, model, tokenizer, cfg
        self.keep_last, self.keep_best = keep_last, keep_best

    def save(self, path: Path, progress: TrainingProgress, bleu: float | None, state: dict | None = None) -> None:
        """The weights, tokenizer and config (and `state`, making it resumable) with step/epoch/BLEU/minutes."""
        save_checkpoint(
            path,
            self.model,
            self.tokenizer,
            self.cfg,
            state,
            step=progress.step,
            epoch=progress.epoch,
            val_bleu="" if bleu is None else f"{bleu:.2f}",
            train_minutes=f"{progress.train_seconds() / 60:.1f}",
        )

    def save_validated(self, progress: TrainingProgress, bleu: float, is_best: bool) -> None:
        """A step checkpoint after a validation; prunes the older ones (`progress.history`) and writes `best`."""
        self.save(self.run.step(progress.step), progress, bleu)
        history = [*progress.history, [progress.step, bleu]]
        progress.history = prune_steps(self.run, history, self.keep_last, self.keep_best)
        if is_best:
            self.save(self.run.best, progress, bleu)

    def save_last(self, progress: TrainingProgress, optimizer: torch.optim.Optimizer, scaler) -> None:
        """The resumable `last` checkpoint: weights plus optimizer, gradient scaler, progress and RNG states."""
        state = {
            "optimizer": optimizer_state(optimizer),
            "scaler": scaler.state_dict(),
            "progress": progress.state_dict(),
            "rng": rng_state(),
        }
        self.save(self.run.last, progress, progress.best_bleu, state)

    def initialise(self, file: Path) -> None:
        """Fine-tuning: copy a trained model's weights, nothing else (optimizer, schedule, step, epoch position and
        best BLEU start afresh)."""
        ckpt = load_checkpoint(str(file), next(self.model.parameters()).device)
        self.model.load_state_dict(ckpt.model.state_dict())
        log.info(
            "fine-tuning from %s (its step %s, val BLEU %s): its weights and vocabulary; a fresh optimizer, "
            "learning-rate schedule, step count and best BLEU",
            file,
            ckpt.meta.get("step", "?"),
            ckpt.meta.get("val_bleu") or "?",
        )

    def restore(self, file: Path, progress: TrainingProgress, optimizer: torch.optim.Optimizer, scaler) -> None:
        """Load a resumable checkpoint's weights and states into the model, `optimizer`, `scaler` and `progress`."""
        ckpt = load_checkpoint(str(file), next(self.model.parameters()).device)
        if ckpt.state is None:
            raise UserError(f"{file} holds weights only; resume from a run's checkpoints/last.safetensors")
        self.model.load_state_dict(ckpt.model.state_dict())
        load_optimizer_state(optimizer, ckpt.state["optimizer"])
        scaler.load_state_dict(ckpt.state["scaler"])
        progress.load_state_dict(ckpt.state["progress"])
        set_rng_state(ckpt.state["rng"])
        log.info(
            "resumed from %s at step %d (epoch %d, batch %d)", file, progress.step, progress.epoch, progress.position
        )
