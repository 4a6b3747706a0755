"""Training state as flat tensors plus JSON, so a resumable checkpoint needs no pickle.

Covers what `trainer.resume` must restore beyond the weights: optimizer moments,
gradient-scaler state, progress counters and every RNG.
"""

import json
import random

import numpy as np
import torch
from torch import Tensor

PREFIX = "state."


def _split(tree, tensors: dict[str, Tensor], path: str):
    """Replace each tensor in a nested dict/list by a reference, collecting it in `tensors`."""
    if isinstance(tree, Tensor):
        tensors[path] = tree.detach().contiguous().cpu()
        return {"__tensor__": path}
    if isinstance(tree, dict):
        return {str(k): _split(v, tensors, f"{path}.{k}") for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_split(v, tensors, f"{path}.{i}") for i, v in enumerate(tree)]
    return tree


def _join(tree, tensors: dict[str, Tensor]):
    if isinstance(tree, dict):
        if "__tensor__" in tree:
            return tensors[tree["__tensor__"]]
        return {k: _join(v, tensors) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_join(v, tensors) for v in tree]
    return tree


def rng_state() -> dict:
    """Python, NumPy, torch (and CUDA) random generator states, JSON-friendly apart from tensors."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(internal), gauss],
        "numpy": [name, keys.tolist(), pos, has_gauss, cached],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def pack(state: dict) -> tuple[dict[str, Tensor], str]:
    """A nested state of tensors and plain values -> (flat tensors named `state.*`, JSON of the rest)."""
    tensors: dict[str, Tensor] = {}
    skeleton = _split(state, tensors, PREFIX.rstrip("."))
    return tensors, json.dumps(skeleton)


def unpack(tensors: dict[str, Tensor], skeleton: str) -> dict:
    """The inverse of `pack`."""
    return _join(json.loads(skeleton), tensors)


def optimizer_state(optimizer: torch.optim.Optimizer) -> dict:
    """The optimizer's state dict with integer parameter ids turned into JSON keys."""
    state = optimizer.state_dict()
    return {"state": {str(k): v for k, v in state["state"].items()}, "param_groups": state["param_groups"]}


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict) -> None:
    optimizer.load_state_dict(
        {"state": {int(k): v for k, v in state["state"].items()}, "param_groups": state["param_groups"]}
    )
