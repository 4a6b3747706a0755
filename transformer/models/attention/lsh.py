"""`lsh`: Reformer's LSH attention (Kitaev et al. 2020), encoder self-attention.

Keys are the normalised queries (shared QK). Each of `n_hashes` rounds hashes them
into buckets by a random rotation R (argmax of [xR, −xR]), sorts positions by
bucket, cuts the order into chunks of `bucket_size`, and lets each chunk attend to
itself and the previous chunk (a query sees itself only if nothing else). Rounds are
combined by their log-sum-exp. Time O(T·log T + T·c), memory O(T·c) for chunk c.
Rotations are fixed (seeded), so a trained model is deterministic. Refused in the
decoder: sorting mixes future positions into a chunk and the buckets change as the
prefix grows; refused for cross-attention (queries and keys must be shared).
"""

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer.models.attention.base import Attention

SELF = -1e5  # a query's score for itself: used only when its chunks hold nothing else
NEG = -1e9


class LSHAttention(Attention):
    """Bucketed shared-QK attention with `config.n_hashes` rounds of `config.bucket_size` chunks."""

    uses = ("encoder",)

    def add_parameters(self) -> None:
        self.k_proj = None  # keys are the normalised queries

    def project_kv(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        return F.normalize(self.project_q(x), dim=-1), self.split_heads(self.v_proj(x))

    def buckets(self, k: Tensor, n_buckets: int) -> Tensor:
        """Bucket ids (B, H, R, T) of keys (B, H, T, Dh) under the fixed random rotations."""
        gen = torch.Generator().manual_seed(n_buckets)
        rot = torch.randn(self.config.n_hashes, k.size(-1), n_buckets // 2, generator=gen).to(k)
        r = torch.einsum("bhtd,rdn->bhrtn", k, rot)
        return torch.cat([r, -r], dim=-1).argmax(dim=-1)

    def n_buckets(self, length: int) -> int:
        return max(2, 2 * math.ceil(length / self.config.bucket_size / 2))

    def weights(self, q: Tensor, k: Tensor, mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        """Dense map under "same bucket in some round" (what the chunks approximate), for plots."""
        b = self.buckets(k, self.n_buckets(k.size(2)))
        same = (b[..., :, None] == b[..., None, :]).any(dim=2)  # (B, H, T, T)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(~same, NEG)
        return torch.softmax(scores if mask is None else scores.masked_fill(~mask, NEG), dim=-1)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        bsz, h, t, dh = q.shape
        c, rounds = self.config.bucket_size, self.config.n_hashes
        n = math.ceil(t / c)
        pad = n * c - t
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        valid = torch.ones(bsz, t, dtype=torch.bool, device=q.device) if mask is None else mask.reshape(bsz, t)
        valid = F.pad(valid, (0, pad))[:, None, None, :]  # (B, 1, 1, T')
        buckets = self.buckets(k, self.n_buckets(t)).masked_fill(~valid, self.n_buckets(t))  # padding sorts last
        pos = torch.arange(n * c, device=q.device)
        order = (buckets * (n * c) + pos).argsort(dim=-1)  # (B, H, R, T')

        def sort(x: Tensor) -> Tensor:  # (B, H, T', Dh) -> (B, H, R, n, c, Dh)
            idx = order[..., None].expand(-1, -1, -1, -1, x.size(-1))
            return x[:, :, None].expand(-1, -1, rounds, -1, -1).gather(3, idx).view(bsz, h, rounds, n, c, -1)

        def with_previous(x: Tensor) -> Tensor:  # (B, H, R, n, c, ...) -> (B, H, R, n, 2c, ...)
            return torch.cat([x, x.roll(1, dims=3)], dim=4)

        sq, sk, sv = sort(q), with_previous(sort(k)), with_previous(sort(v))
        spos = order.view(bsz, h, rounds, n, c)
        kpos, kvalid = (
            with_previous(spos),
            with_previous(valid.expand(bsz, h, rounds, -1).gather(3, order).view_as(spos)),
        )
        scores = sq @ sk.transpose(-2, -1) / math.sqrt(dh)  # (B, H, R, n, c, 2c)
        scores = scores.masked_fill(spos[..., :, None] == kpos[..., None, :], SELF)
        scores = scores.masked_fill(~kvalid[..., None, :], NEG)
        lse = scores.logsumexp(dim=-1, keepdim=True)  # (B, H, R, n, c, 1)
        p = F.dropout(torch.exp(scores - lse), self.dropout, self.training)
        out = torch.cat([p @ sv, lse], dim=-1).view(bsz, h, rounds, n * c, dh + 1)
        undo = order.argsort(dim=-1)[..., None].expand(-1, -1, -1, -1, dh + 1)
        out = out.gather(3, undo)  # back to positions: (B, H, R, T', Dh + 1)
        y, lse = out[..., :dh], out[..., dh:]
        y = (y * torch.softmax(lse, dim=2)).sum(dim=2)  # rounds weighted by their mass
        return y[:, :, :t]
