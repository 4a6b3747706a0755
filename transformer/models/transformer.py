"""The encoder-decoder Transformer (Vaswani et al. 2017), readable top to bottom.

Pre-norm by default (stable without long warmup); `pre_norm=False` gives the
paper's post-norm. Shapes: B batch, S source length, T target length,
D d_model, H heads, V vocabulary.
"""

import math
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer.core.config import ModelConfig
from transformer.core.special_ids import PAD_ID
from transformer.models.attention import Attention, build_attention, padding_mask
from transformer.models.decoder_cache import DecoderCache
from transformer.models.dropout import Dropout


def sinusoidal_positions(n_positions: int, d_model: int) -> Tensor:
    """The paper's fixed position table (n_positions, D): sin on even, cos on odd dims."""
    position = torch.arange(n_positions, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table


class FeedForward(nn.Module):
    """Position-wise feed-forward: Linear -> ReLU -> dropout -> Linear (the paper has no inner dropout: 0)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class Sublayer(nn.Module):
    """Residual wrapper: x + dropout(f(norm(x))) for pre-norm, norm(x + dropout(f(x))) for post-norm."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(self, x: Tensor, fn) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(fn(self.norm(x)))
        return self.norm(x + self.dropout(fn(x)))


def attention(cfg: ModelConfig, use: str) -> Attention:
    """The attention module `cfg.attention` chooses for `use` (encoder | decoder | cross)."""
    a = cfg.attention
    return build_attention(getattr(a, use), cfg.d_model, cfg.n_heads, cfg.attention_dropout, a, cfg.max_positions)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = attention(cfg, "encoder")
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout)
        self.attn_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.ff_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(self, x: Tensor, src_mask: Tensor, record: list[Tensor] | None = None) -> Tensor:
        """x (B, S, D) attends to itself; `record` receives the attention weights (B, H, S, S)."""
        attn = self.self_attn
        x = self.attn_block(x, lambda h: attn(*attn.project_qkv(h, src_mask), mask=src_mask, record=record))
        return self.ff_block(x, self.ff)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn = attention(cfg, "decoder")
        self.cross_attn = attention(cfg, "cross")
        self.ff = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout)
        self.self_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.cross_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)
        self.ff_block = Sublayer(cfg.d_model, cfg.dropout, cfg.pre_norm)

    def forward(
        self,
        x: Tensor,
        cross_kv: tuple[Tensor, Tensor],
        src_mask: Tensor,
        cache: DecoderCache | None = None,
        index: int = 0,
        record: list[Tensor] | None = None,
    ) -> Tensor:
        """x (N, T, D) attends causally to itself (or to its cached prefix) and to the source.

        `record` receives the cross-attention weights (N, H, T, S)."""

        def self_attention(h: Tensor) -> Tensor:
            q, k, v = self.self_attn.project_qkv(h)
            if cache is not None:
                k, v = cache.extend(index, k, v)  # the prefix so far: the new positions are its last ones
            return self.self_attn(q, k, v, is_causal=True)

        def cross_attention(h: Tensor) -> Tensor:
            return self.cross_attn(self.cross_attn.project_q(h), *cross_kv, mask=src_mask, record=record)

        x = self.self_block(x, self_attention)
        x = self.cross_block(x, cross_attention)
        return self.ff_block(x, self.ff)


class Transformer(nn.Module):
    """Encoder-decoder Transformer; `forward(src, tgt_in)` gives next-token logits (B, T, V)."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        config: ModelConfig | None = None,
        *,
        pad_id: int = PAD_ID,
        joint_vocab: bool = False,
        **fields,
    ):
        """`config` (default `ModelConfig()`) with any of its fields overridden by keyword, e.g. `d_model=512`."""
        super().__init__()
        cfg = self.config = replace(config or ModelConfig(), **fields)
        self.pad_id = pad_id
        self.d_model = cfg.d_model
        self.max_positions = cfg.max_positions
        self.tgt_embed = nn.Embedding(tgt_vocab_size, cfg.d_model, padding_idx=pad_id)
        share_src = joint_vocab and cfg.tie_embeddings and src_vocab_size == tgt_vocab_size
        self.src_embed = self.tgt_embed if share_src else nn.Embedding(src_vocab_size, cfg.d_model, padding_idx=pad_id)
        self.register_buffer("positions", sinusoidal_positions(cfg.max_positions, cfg.d_model), persistent=False)
        self.dropout = Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_decoder_layers))
        # Pre-norm leaves the residual stream unnormalised; normalise once at the end.
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.pre_norm else nn.Identity()
        self.output = nn.Linear(cfg.d_model, tgt_vocab_size, bias=False)
        self._init_weights()
        if cfg.tie_embeddings:
            self.output.weight = self.tgt_embed.weight

    def _init_weights(self) -> None:
        """Xavier-uniform linear layers with zero biases, N(0, d^-0.5) embeddings."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=self.d_model**-0.5)
                nn.init.zeros_(module.weight[self.pad_id])

    def embed(self, embedding: nn.Embedding, tokens: Tensor, offset: int = 0) -> Tensor:
        """Scaled token embeddings plus sinusoidal positions (N, T, D)."""
        if offset + tokens.size(1) > self.max_positions:
            raise ValueError(f"sequence of {offset + tokens.size(1)} tokens exceeds max_positions={self.max_positions}")
        x = embedding(tokens) * math.sqrt(self.d_model)
        return self.dropout(x + self.positions[offset : offset + tokens.size(1)])

    def encode(self, src: Tensor, record: list[Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """Source ids (B, S) -> memory (B, S, D), zero at padding, and its key-padding mask (B, 1, 1, S).

        `record` receives each layer's self-attention weights (B, H, S, S)."""
        src_mask = padding_mask(src, self.pad_id)
        x = self.embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, src_mask, record)
        return self.encoder_norm(x) * src_mask.view(src.size(0), -1, 1), src_mask

    def init_cache(self, memory: Tensor, group: int, max_len: int) -> DecoderCache:
        """A cache for decoding `group` hypotheses per source sentence, up to `max_len` steps."""
        cross_kv = [layer.cross_attn.project_kv(memory) for layer in self.decoder]
        return DecoderCache(cross_kv, group, max_len, self.decoder[0].self_attn.reach)

    def decode(
        self,
        tgt_in: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: DecoderCache | None = None,
        record: list[Tensor] | None = None,
    ) -> Tensor:
        """Target prefix ids (B·G, T) -> next-token logits (B·G, T, V).

        Without a cache `tgt_in` is the whole prefix; with one it holds only the
        new positions and the earlier ones come from the cache. `record` receives
        each layer's cross-attention weights.
        """
        offset = 0
        if cache is not None:
            cache.make_room(tgt_in.size(1))
            offset = cache.length
        x = self.embed(self.tgt_embed, tgt_in, offset)
        for i, layer in enumerate(self.decoder):
            cross_kv = cache.cross_kv[i] if cache is not None else layer.cross_attn.project_kv(memory)
            x = layer(x, cross_kv, src_mask, cache, i, record)
        if cache is not None:
            cache.advance(tgt_in.size(1))
        return self.output(self.decoder_norm(x))

    def forward(self, src: Tensor, tgt_in: Tensor, record: list[Tensor] | None = None) -> Tensor:
        """Teacher-forced logits (B, T, V) for source (B, S) and shifted target (B, T); `record` receives each
        decoder layer's cross-attention weights (B, H, T, S)."""
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask, record=record)

    @property
    def cross_attention_layers(self) -> int:
        """How many layers `cross_attention` gives weights for."""
        return len(self.decoder)

    @torch.inference_mode()
    def cross_attention(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced cross-attention probabilities (layers, B, H, T, S) for `tgt_in` given `src`."""
        self.eval()
        weights: list[Tensor] = []
        self.decode(tgt_in, *self.encode(src), record=weights)
        return torch.stack(weights)

    @torch.inference_mode()
    def self_attention(self, src: Tensor) -> Tensor:
        """Encoder self-attention probabilities (layers, B, H, S, S) of `src`."""
        self.eval()
        weights: list[Tensor] = []
        self.encode(src, record=weights)
        return torch.stack(weights)
