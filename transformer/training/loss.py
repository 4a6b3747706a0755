"""The training objective: label-smoothed cross-entropy summed over the target tokens."""

import torch
import torch.nn.functional as F
from torch import nn

from transformer.core.special_ids import PAD_ID
from transformer.data.batching import Batch


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
