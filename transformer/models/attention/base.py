"""The attention module protocol every variant follows.

A module owns its projections (`q_proj`, `k_proj`, `v_proj`, `out_proj`, plain
`nn.Linear`), how it scores (`attend`) and the dense map it can show (`weights`).
Layers call `project_qkv` (self-attention), `project_q` + `project_kv`
(cross-attention, keys/values once per source) and `forward(q, k, v, mask, is_causal)`
without knowing the variant. In cached decoding the keys are the whole prefix and the
queries its last T positions, so the causal mask is `prefix_causal_mask(T, L)`.
"""

import torch
from torch import Tensor, nn

from transformer.core.config import AttentionConfig, ModelConfig
from transformer.models.attention.masks import attention_weights, combine, prefix_causal_mask

USES = ("encoder", "decoder", "cross")  # encoder self-attention, causal decoder self-attention, cross-attention


class Attention(nn.Module):
    """Multi-head attention with the scoring left to `attend`; subclasses set `uses`."""

    uses: tuple[str, ...] = USES

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        config: AttentionConfig | None = None,
        max_length: int = ModelConfig.max_positions,
    ):
        """`config` holds the variants' settings (default `AttentionConfig()`); `max_length` is the longest key
        sequence (the model's `max_positions`), which linformer's projections span."""
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.n_heads, self.d_model, self.dropout = n_heads, d_model, dropout
        self.config, self.max_length = config or AttentionConfig(), max_length
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)  # a key bias adds q·b to a whole row: softmax cancels it
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.add_parameters()

    def add_parameters(self) -> None:
        """Where a variant adds (or removes) parameters of its own, after the projections."""

    @property
    def reach(self) -> int | None:
        """How many positions back (itself included) a causal query can see; None: the whole prefix."""
        return None

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        return x.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)  # (B, H, T, Dh)

    def project_qkv(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of `x` (B, T, D), each (B, H, T, Dh)."""
        return self.project_q(x), *self.project_kv(x, mask)

    def project_q(self, x: Tensor) -> Tensor:
        """Queries of `x` (B, T, D) -> (B, H, T, Dh)."""
        return self.split_heads(self.q_proj(x))

    def project_kv(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Keys and values of `x` (B, S, D), each (B, H, S, Dh); `mask` (B, 1, 1, S) marks real tokens."""
        return self.split_heads(self.k_proj(x)), self.split_heads(self.v_proj(x))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool) -> Tensor:
        """Attention output (B, H, Tq, Dh) of queries (B, H, Tq, Dh) over keys/values (B, H, S, Dh)."""
        raise NotImplementedError

    def pattern(self, queries: int, keys: int, is_causal: bool, device: torch.device) -> Tensor | None:
        """Which keys each query may see by position (Tq, S), queries being the last `queries` of `keys`."""
        return prefix_causal_mask(queries, keys, device) if is_causal else None

    def weights(self, q: Tensor, k: Tensor, mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        """The attention probabilities as a dense (B, H, Tq, S) map, for plots."""
        return attention_weights(q, k, combine(mask, self.pattern(q.size(2), k.size(2), is_causal, q.device)))

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        is_causal: bool = False,
        record: list[Tensor] | None = None,
    ) -> Tensor:
        """Attend from queries (B·G, H, T, Dh) to keys/values (B, H, S, Dh) -> output (B·G, T, D).

        When the query batch is G times the key batch (G beam hypotheses per source
        sentence; never causal), the G query rows of a sentence share its keys and
        values without copying them. `record` receives the (B·G, H, T, S) weights.
        """
        bg, h, t, dh = q.shape
        groups = bg // k.size(0)
        if groups > 1:  # fold the hypotheses of a sentence into its query axis
            q = q.view(k.size(0), groups, h, t, dh).transpose(1, 2).reshape(k.size(0), h, groups * t, dh)
        if record is not None:
            w = self.weights(q, k, mask, is_causal)
            record.append(w.view(k.size(0), h, groups, t, -1).transpose(1, 2).reshape(bg, h, t, -1))
        y = self.attend(q, k, v, mask, is_causal)
        if groups > 1:  # (B, H, G·T, Dh) -> (B·G, H, T, Dh)
            y = y.view(k.size(0), h, groups, t, dh).transpose(1, 2).reshape(bg, h, t, dh)
        y = y.transpose(1, 2).reshape(bg, t, h * dh)  # (B·G, T, D)
        return self.out_proj(y)
