"""What the fast-inference tests share: a tiny model trained so that its outputs are not near ties."""

import pytest
import torch

from tests.conftest import fit, tiny_model
from transformer.data.batching import collate


@pytest.fixture(scope="module")
def trained():
    """A tiny model trained briefly to reverse sequences (right on nearly all of them), and its pairs as a batch."""
    g = torch.Generator().manual_seed(0)
    src = [torch.randint(3, 30, (int(n),), generator=g).tolist() for n in torch.randint(3, 9, (96,), generator=g)]
    batch = collate(src, [s[::-1] for s in src])
    return fit(tiny_model(vocab=30), batch, steps=60), batch
