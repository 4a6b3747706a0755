"""Number formats shared by the walk-through's modules: what the JSON keeps and what the page prints."""

import torch


def rows(t: torch.Tensor, digits: int = 6):
    """A tensor as nested lists of rounded floats (what the JSON keeps)."""
    return torch.round(t.double(), decimals=digits).tolist()


def num(x: float, digits: int = 4) -> str:
    """A number as the page prints it."""
    return f"{x:.{digits}f}"
