"""One optimizer step: micro-batches under autocast, gradient scaling, clipping and the non-finite guard."""

import contextlib
import logging
from dataclasses import dataclass

import torch
from torch import nn

from transformer.compute.auto import resolve
from transformer.compute.runtime import autocast
from transformer.core.config import OptimConfig, TrainerConfig
from transformer.core.errors import UserError
from transformer.core.precision import PRECISIONS
from transformer.data.batching import Batch
from transformer.training.loss import guided_loss_sums, loss_sum
from transformer.training.optim import lr_multiplier, set_lr

log = logging.getLogger(__name__)


@dataclass
class StepResult:
    loss: float  # this process' loss per target token
    applied: bool  # False when a non-finite gradient made the step be skipped
    tokens: float  # target tokens of the step, over all processes
    alignment: float | None = None  # guided alignment: this process' alignment loss per target token


class TrainStep:
    """Forward and backward over one process' micro-batches, then one clipped optimizer step.

    Under DDP the gradients are synchronised on the last micro-batch only (`no_sync` before it).
    fp16 scales the loss with a GradScaler. A step whose gradient norm is not finite is skipped
    and not counted, in every precision; `max_nonfinite` of them in a row stop the run.
    """

    def __init__(
        self,
        model: nn.Module,
        train_model: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        optim: OptimConfig,
        trainer: TrainerConfig,
        world: int,
    ):
        """`optim` gives the loss's label smoothing, the clip and the schedule; `trainer` the precision,
        `compile` and `max_nonfinite`; `world` is the number of processes."""
        self.model, self.train_model, self.optimizer, self.cfg = model, train_model, optimizer, optim
        self.precision, self.max_nonfinite, self.world = trainer.precision, trainer.max_nonfinite, world
        self.device = next(model.parameters()).device
        scaled = PRECISIONS[resolve(self.precision, "training", self.device.type)].scales_loss
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=scaled)
        # trainer.compile: the model and its loss in one graph (the loss over the vocabulary fuses into it)
        self.guided = trainer.guided_alignment if trainer.guided_alignment.weight > 0 else None
        objective = self._guided if self.guided else loss_sum
        self.objective = torch.compile(objective) if trainer.compile else objective
        self.nonfinite = 0  # consecutive skipped steps

    def _guided(self, model: nn.Module, batch: Batch, label_smoothing: float) -> torch.Tensor:
        """The translation loss plus weight times the alignment loss; the latter is kept for the log."""
        translation, alignment = guided_loss_sums(model, batch, label_smoothing, self.guided)
        self.aligned += alignment.detach()
        return translation + self.guided.weight * alignment

    def __call__(self, batches: list[Batch], total_tokens: float, step: int, budget_used: float) -> StepResult:
        """Step number `step + 1`; `total_tokens` counts the target tokens of every process' micro-batches."""
        self.train_model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss_total = torch.zeros((), device=self.device)
        self.aligned = torch.zeros((), device=self.device)
        for i, batch in enumerate(batches):
            batch = batch.to(self.device)
            sync = i == len(batches) - 1 or self.world == 1
            context = contextlib.nullcontext() if sync else self.train_model.no_sync()
            with context, autocast(self.device, self.precision):
                loss = self.objective(self.train_model, batch, self.cfg.label_smoothing)
            # DDP averages gradients over processes; scaling by world size makes that a sum over all tokens.
            self.scaler.scale(loss * self.world / total_tokens).backward()
            loss_total += loss.detach()
        n_tokens = sum(b.n_tokens for b in batches)
        if self.guided:  # the log shows the translation loss alone, and the alignment loss beside it
            loss_total -= self.guided.weight * self.aligned
        loss_per_token = loss_total.item() / n_tokens
        alignment = self.aligned.item() / n_tokens if self.guided else None
        self.scaler.unscale_(self.optimizer)
        clip = self.cfg.clip_norm if self.cfg.clip_norm > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        if not torch.isfinite(norm):
            self._skip(step + 1, norm.item())
            return StepResult(loss_per_token, False, total_tokens, alignment)
        self.nonfinite = 0
        set_lr(self.optimizer, self.cfg.lr * lr_multiplier(self.cfg, step + 1, budget_used))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return StepResult(loss_per_token, True, total_tokens, alignment)

    def _skip(self, step: int, norm: float) -> None:
        """Leave the weights alone; under fp16 the scaler lowers its scale. Too many in a row stop the run."""
        self.scaler.update()  # fp16: unscale_ saw the inf/nan, so this backs off the scale; otherwise a no-op
        self.nonfinite += 1
        scale = f", gradient scale now {self.scaler.get_scale():g}" if self.scaler.is_enabled() else ""
        log.warning(
            "step %d: non-finite gradient (norm %s); step skipped (%d in a row%s)", step, norm, self.nonfinite, scale
        )
        if self.nonfinite >= self.max_nonfinite:
            raise UserError(
                f"{self.nonfinite} consecutive steps had non-finite gradients; lower optim.lr, "
                "raise optim.warmup_steps or use trainer.precision=fp32"
            )
