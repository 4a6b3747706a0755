"""The training objective: label-smoothed cross-entropy summed over the target tokens, and with guided alignment
a cross-entropy between one cross-attention head and the training corpus's word alignments."""

import torch
import torch.nn.functional as F
from torch import nn

from transformer.core.config import GuidedAlignmentConfig
from transformer.core.special_ids import PAD_ID
from transformer.data.batching import Batch


def alignment_loss(weights: torch.Tensor, links: torch.Tensor, link_weights: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of attention (B, T, S) against the links (K, 3) of (row, target, source), each target piece's
    links sharing its probability mass (`link_weights`), summed over target pieces (Garg et al., 2019, eq. 6)."""
    attended = weights[links[:, 0], links[:, 1], links[:, 2]].float()  # (K,)
    return -(link_weights * attended.clamp_min(1e-9).log()).sum()


def translation_loss(logits: torch.Tensor, batch: Batch, label_smoothing: float) -> torch.Tensor:
    """Summed label-smoothed cross-entropy of logits (B, T, V) over the batch's non-pad target tokens."""
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        batch.tgt_out.flatten(),
        ignore_index=PAD_ID,
        label_smoothing=label_smoothing,
        reduction="sum",
    )


def loss_sum(model: nn.Module, batch: Batch, label_smoothing: float) -> torch.Tensor:
    """Summed label-smoothed cross-entropy over the batch's non-pad target tokens."""
    return translation_loss(model(batch.src, batch.tgt_in), batch, label_smoothing)


def guided_loss_sums(
    model: nn.Module, batch: Batch, label_smoothing: float, guided: GuidedAlignmentConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """The translation loss and the alignment loss of `guided`'s head over the batch's links, both summed."""
    record: list[torch.Tensor] = []
    logits = model(batch.src, batch.tgt_in, record=record)
    head = record[guided.layer][:, guided.head]  # (B, T, S)
    return translation_loss(logits, batch, label_smoothing), alignment_loss(head, batch.links, batch.link_weights)
