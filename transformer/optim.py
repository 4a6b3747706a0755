"""The training objective and optimizer: label-smoothed cross-entropy, Adam, inverse-sqrt schedule."""

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


def make_optimizer(model: nn.Module, cfg: OptimConfig):
    """Adam (fused kernel) and its inverse-sqrt schedule, stepped once per optimizer step."""
    optimizer = torch.optim.Adam(
        model.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay, fused=True
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: inverse_sqrt(step, cfg.warmup_steps))
    return optimizer, scheduler
