"""One decoder step of a `Transformer` with every shape fixed by its inputs: what a CUDA graph records and what
`torch.export` turns into a compiled package (`fast_inference.compiled`).

The self-attention keys and values live in one tensor per layer and kind, of the search's whole length L, and the
step writes the fed tokens' keys and values at `position` (a tensor, not a Python int), so one graph serves every
step; keys past the position are masked. Cross-attention's keys and values are made once per source, outside.
"""

import math
from functools import partial

import torch
from torch import Tensor, nn


class DecoderStep(nn.Module):
    """Feeds `tokens` (N, 1) at `position` (a 0-d long tensor) and gives the next-token logits (N, V).

    `kv` holds each layer's self-attention keys then values (N, H, L, Dh), written in place at `position`, then each
    layer's cross-attention keys then values (N / G, H, S, Dh), G rows a source; `src_mask` (N / G, 1, 1, S) marks
    real source tokens.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor, position: Tensor, src_mask: Tensor, *kv: Tensor) -> Tensor:
        model, layers = self.model, len(self.model.decoder)
        at = position.view(1)
        x = model.tgt_embed(tokens) * math.sqrt(model.d_model) + model.positions.index_select(0, at)  # (N, 1, D)
        seen = (torch.arange(kv[0].size(2), device=tokens.device) <= position).view(1, 1, 1, -1)  # (1, 1, 1, L)
        for i, layer in enumerate(model.decoder):
            own, memory = kv[2 * i : 2 * i + 2], kv[2 * (layers + i) : 2 * (layers + i) + 2]
            x = layer.self_block(x, partial(_self_attention, layer.self_attn, at, seen, *own))
            x = layer.cross_block(x, partial(_cross_attention, layer.cross_attn, src_mask, *memory))
            x = layer.ff_block(x, layer.ff)
        return model.output(model.decoder_norm(x))[:, -1]  # (N, V)


def _self_attention(attention: nn.Module, at: Tensor, seen: Tensor, keys: Tensor, values: Tensor, h: Tensor) -> Tensor:
    """Self-attention of the fed positions h (N, 1, D) over the prefix `seen`, their keys and values written at `at`."""
    q, k, v = attention.project_qkv(h)  # each (N, H, 1, Dh)
    keys.index_copy_(2, at, k)
    values.index_copy_(2, at, v)
    return attention(q, keys, values, mask=seen)


def _cross_attention(attention: nn.Module, src_mask: Tensor, keys: Tensor, values: Tensor, h: Tensor) -> Tensor:
    """Cross-attention of h (N, 1, D) over the source's keys and values, made once per source."""
    return attention(attention.project_q(h), keys, values, mask=src_mask)
