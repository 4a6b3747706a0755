"""A tiny model memorises a handful of pairs and translates them back exactly."""

import pytest
import torch

from tests.conftest import fit, tiny_model
from transformer.data.batching import collate
from transformer.decoding import beam_search, greedy_decode


@pytest.mark.slow
def test_tiny_model_memorises_pairs():
    g = torch.Generator().manual_seed(0)
    src_ids = [torch.randint(3, 30, (int(n),), generator=g).tolist() for n in torch.randint(3, 8, (6,), generator=g)]
    tgt_ids = [list(reversed(s)) + [s[0]] for s in src_ids]  # a deterministic "translation"
    batch = collate(src_ids, tgt_ids)
    model = fit(tiny_model(vocab=30, d_model=64, d_ff=128), batch, steps=300)
    out = greedy_decode(model, batch.src, bos_id=1, eos_id=2, max_len=12).tolist()
    assert [[t for t in row if t not in (0, 2)] for row in out] == tgt_ids
    assert beam_search(model, batch.src, beam_size=3, bos_id=1, eos_id=2, max_len=12) == tgt_ids
