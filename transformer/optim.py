"""The training objective and optimizer: label-smoothed cross-entropy, Adam and its learning-rate schedules."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from transformer.batching import Batch
from transformer.config import OptimConfig
from transformer.tokenizer import PAD_ID


def loss_sum(model: nn.Module, batch: Batch, label_smoothing: float) -> torch.Tensor:
    """Summed label-smoothed cross-entropy over the batch's non-pad target tokens."""
    logits = model(batch.src, batch.tgt_in)  # (B, T, V)
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        batch.tgt_out.flatten(),
        ignore_index=PAD_ID,
        label_smoothing=label_smoothing,
        reduction="sum",
    )


def inverse_sqrt(step: int, warmup: int) -> float:
    """Learning-rate multiplier: linear warmup to 1 at `warmup`, then (warmup/step)^0.5 (Vaswani et al.)."""
    step = max(step, 1)
    return min(step / warmup, math.sqrt(warmup / step)) if warmup > 0 else 1.0 / math.sqrt(step)


def lr_multiplier(cfg: OptimConfig, step: int, progress: float) -> float:
    """The fraction of `cfg.lr` for optimizer step `step` (1-based), `progress` in [0, 1] of the training budget.

    `linear` is a linear warmup times a linear decay to zero at the end of the budget: annealing fully
    within a fixed time is what a short run needs (Li et al., 2020, "Budgeted training").
    """
    if cfg.schedule == "inverse_sqrt":
        return inverse_sqrt(step, cfg.warmup_steps)
    warmup = min(step / cfg.warmup_steps, 1.0) if cfg.warmup_steps > 0 else 1.0
    return warmup * max(1.0 - progress, 0.0)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def make_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.Adam:
    """Adam with the fused kernel; the trainer sets its learning rate before every step."""
    return torch.optim.Adam(
        model.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay, fused=True
    )
