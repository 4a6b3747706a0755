"""The model's tensors under stable names, the input of every exporter."""

import torch
from torch import Tensor

from transformer.model import Transformer


def _split_fused_attention(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """TEMPORARY until the q/k/v projections land (branch b24model): fused `in_proj` -> q/k/v_proj names."""
    out = {}
    for name, tensor in state.items():
        scope, _, leaf = name.rpartition(".")
        if leaf == "in_proj":
            q, k, v = tensor.chunk(3)
            out |= {f"{scope}.q_proj.weight": q, f"{scope}.k_proj.weight": k, f"{scope}.v_proj.weight": v}
        elif leaf in ("q_bias", "v_bias"):
            out[f"{scope}.{leaf[0]}_proj.bias"] = tensor
        else:
            out[name] = tensor
    return out


def named_weights(model: Transformer) -> dict[str, Tensor]:
    """Every tensor by its state-dict name (attention as `q_proj`, `k_proj` (no bias), `v_proj`, `out_proj`),
    detached float32 on the CPU, plus the position table as `positions` (P, D)."""
    state = _split_fused_attention(model.state_dict())
    state["positions"] = model.positions
    return {name: t.detach().to("cpu", torch.float32) for name, t in state.items()}
