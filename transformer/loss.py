"""The training objective: label-smoothed cross-entropy summed over the target tokens."""

import torch
import torch.nn.functional as F
from torch import nn

from transformer.batching import Batch
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
