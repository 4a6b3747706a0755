"""The optimizer: Adam and its learning-rate schedules (the loss is in `transformer.training.loss`)."""

import math

import torch
from torch import nn

from transformer.core.config import OptimConfig, Schedule, choices


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
    if cfg.schedule == "linear":
        warmup = min(step / cfg.warmup_steps, 1.0) if cfg.warmup_steps > 0 else 1.0
        return warmup * max(1.0 - progress, 0.0)
    raise ValueError(f"optim.schedule={cfg.schedule!r}; choose {', '.join(choices(Schedule))}")


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


def make_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.Adam:
    """Adam with the fused kernel; the trainer sets its learning rate before every step."""
    return torch.optim.Adam(
        model.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay, fused=True
    )
