"""`linformer`: low-rank attention (Wang et al. 2020).

Keys and values are projected along the sequence to k rows by learned k×n_max
matrices E, F (padding zeroed first): softmax(Q (E K)ᵀ/√d)·(F V). Time and memory
O(T·k). Encoder self-attention and cross-attention (E K once per source); refused
for causal decoder self-attention (a projected row mixes future positions).
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer.models.attention.base import Attention
from transformer.models.attention.masks import attention_weights


class LinformerAttention(Attention):
    """Attention over `config.rank` learned mixtures of the keys/values."""

    uses = ("encoder", "cross")

    def add_parameters(self) -> None:
        self.e_proj = nn.Parameter(nn.init.xavier_normal_(torch.empty(self.config.rank, self.max_length)))
        self.f_proj = nn.Parameter(nn.init.xavier_normal_(torch.empty(self.config.rank, self.max_length)))

    def project_kv(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Projected keys and values, each (B, H, k, Dh); without `mask`, rows of `x` that are all zero
        (the encoder's memory at padding) count as padding."""
        k, v = super().project_kv(x)
        real = (x != 0).any(dim=-1) if mask is None else mask.reshape(x.size(0), -1)
        real = real[:, None, :, None].to(k.dtype)  # (B, 1, S, 1)
        k, v = k * real, v * real
        s = x.size(1)
        if s > self.max_length:
            raise ValueError(f"linformer: {s} positions exceed its max length {self.max_length}")
        return (
            torch.einsum("rs,bhsd->bhrd", self.e_proj[:, :s], k),
            torch.einsum("rs,bhsd->bhrd", self.f_proj[:, :s], v),
        )

    def weights(self, q: Tensor, k: Tensor, mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        return attention_weights(q, k)  # (B, H, T, k): over the projected rows

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
