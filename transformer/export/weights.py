"""The model's tensors under stable names, the input of every exporter."""

import torch
from torch import Tensor

from transformer.models.transformer import Transformer


def named_weights(model: Transformer) -> dict[str, Tensor]:
    """Every tensor by its state-dict name (attention: `q_proj`, `k_proj` (no bias), `v_proj`, `out_proj`),
    detached float32 on the CPU, plus the position table as `positions` (P, D)."""
    state = {**model.state_dict(), "positions": model.positions}
    return {name: t.detach().to("cpu", torch.float32) for name, t in state.items()}
