"""Ensembles at decoding: several models searched as one, over the average of their log-probabilities.

`Ensemble` has the interface `transformer.decoding.search` uses (`encode`, `init_cache`, `decode`, `pad_id`,
`max_positions`), so every strategy searches it unchanged: each member encodes the batch and keeps its own
cache, and a step returns the mean of the members' logits. The search's log-softmax of that mean is the
log-softmax of the mean of the members' log-probabilities (they differ from the logits by a constant per row),
i.e. the normalised geometric mean of their distributions. An ensemble costs its members' decoding cost summed;
an averaged checkpoint (`transformer-average`) costs one model's.
"""

from collections.abc import Sequence

import torch
from torch import Tensor, nn


class Members(tuple):
    """One value per member (encoder outputs, masks), selected together when sentences leave the batch."""

    def index_select(self, dim: int, index: Tensor) -> "Members":
        return Members(x.index_select(dim, index) for x in self)


class EnsembleCache:
    """Each member's own decoder cache, reordered together."""

    def __init__(self, caches: list):
        self.caches = caches

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        for cache in self.caches:
            cache.reorder(rows, sentences)


class Ensemble(nn.Module):
    """Models with one vocabulary and direction, decoded as one model (see the module's docstring)."""

    def __init__(self, members: Sequence[nn.Module]):
        super().__init__()
        self.members = nn.ModuleList(members)
        self.pad_id = members[0].pad_id
        self.max_positions = min(m.max_positions for m in members)

    def encode(self, src: Tensor) -> tuple[Members, Members]:
        """Each member's memory and source mask for source ids (B, S)."""
        encoded = [m.encode(src) for m in self.members]
        return Members(memory for memory, _ in encoded), Members(mask for _, mask in encoded)

    def init_cache(self, memory: Members, group: int, max_len: int) -> EnsembleCache:
        return EnsembleCache([m.init_cache(x, group, max_len) for m, x in zip(self.members, memory)])

    def decode(self, tgt_in: Tensor, memory: Members, src_mask: Members, cache: EnsembleCache | None = None) -> Tensor:
        """The mean of the members' next-token logits (N, 1, V) after the prefix `tgt_in` (N, T)."""
        caches = cache.caches if cache is not None else [None] * len(self.members)
        logits = [
            m.decode(tgt_in, x, mask, c)[:, -1:].float()  # (N, 1, V)
            for m, x, mask, c in zip(self.members, memory, src_mask, caches)
        ]
        return torch.stack(logits).mean(0)

    @property
    def cross_attention_layers(self) -> int:
        """The first member's decoder layers: attention plots show the first model's attention."""
        return self.members[0].cross_attention_layers

    def cross_attention(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """The first member's cross-attention weights for a teacher-forced pair."""
        return self.members[0].cross_attention(src, tgt_in)
