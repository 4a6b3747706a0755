import math

import pytest
import torch

from tests.conftest import tiny_model
from transformer.decoding import beam_search, beam_search_hypotheses, greedy_decode

BOS, EOS, PAD = 1, 2, 0


def batch_src(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 40, (4, 9), generator=g)
    src[1, 6:] = PAD
    src[3, 3:] = PAD
    return src


@pytest.mark.parametrize("eos", [EOS, -1])
def test_greedy_cached_equals_uncached(eos):
    model, src = tiny_model(), batch_src()
    ids_c, lp_c = greedy_decode(model, src, BOS, eos, 20, use_cache=True, return_scores=True)
    ids_u, lp_u = greedy_decode(model, src, BOS, eos, 20, use_cache=False, return_scores=True)
    assert torch.equal(ids_c, ids_u)
    torch.testing.assert_close(lp_c, lp_u, atol=1e-5, rtol=0)
    if eos == -1:
        assert ids_c.shape == (4, 20) and not (ids_c == PAD).any()


@pytest.mark.parametrize("eos", [EOS, -1])
def test_beam_cached_equals_uncached(eos):
    model, src = tiny_model(seed=3), batch_src(1)
    cached = beam_search_hypotheses(model, src, 4, BOS, eos, 15, n_best=4, use_cache=True)
    uncached = beam_search_hypotheses(model, src, 4, BOS, eos, 15, n_best=4, use_cache=False)
    for hc, hu in zip(cached, uncached):
        assert [h.tokens for h in hc] == [h.tokens for h in hu]
        for a, b in zip(hc, hu):
            assert a.score == pytest.approx(b.score, abs=1e-5)


def test_beam_size_one_equals_greedy():
    model, src = tiny_model(seed=5), batch_src(2)
    greedy = greedy_decode(model, src, BOS, EOS, 20).tolist()
    beam = beam_search(model, src, 1, BOS, EOS, 20, length_penalty=0.0)
    assert beam == [[t for t in row if t not in (EOS, PAD)] for row in greedy]


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_sentence_alone_equals_sentence_in_batch(search):
    model, src = tiny_model(seed=7), batch_src(3)

    def run(x):
        if search == "greedy":
            return [[t for t in row if t not in (EOS, PAD)] for row in greedy_decode(model, x, BOS, EOS, 20).tolist()]
        return beam_search(model, x, 4, BOS, EOS, 20)

    batched = run(src)
    for i in range(src.size(0)):
        length = int((src[i] != PAD).sum())
        assert run(src[i : i + 1, :length]) == [batched[i]]


class ScriptedModel:
    """A 'decoder' whose next-token distributions come from a hand-written table."""

    pad_id = PAD

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], vocab: int = 6):
        self.table, self.vocab = table, vocab

    def eval(self):
        return self

    def encode(self, src):
        return torch.zeros(src.size(0), 1, 1), torch.ones(src.size(0), 1, 1, 1, dtype=torch.bool)

    def decode(self, tgt_in, memory, src_mask, cache=None):
        assert cache is None
        rows = []
        for prefix in tgt_in.tolist():
            probs = torch.full((self.vocab,), 1e-12)
            for tok, p in self.table.get(tuple(prefix[1:]), {EOS: 1.0}).items():
                probs[tok] = p
            rows.append(probs.log())
        return torch.stack(rows)[:, None, :].expand(-1, tgt_in.size(1), -1)


A, B = 3, 4
TABLE = {(): {A: 0.6, B: 0.4}, (A,): {A: 0.34, B: 0.33, EOS: 0.33}, (B,): {EOS: 0.9, A: 0.1}}


def test_beam_finds_the_sequence_greedy_misses():
    model, src = ScriptedModel(TABLE), torch.tensor([[5, EOS]])
    greedy = greedy_decode(model, src, BOS, EOS, 4, use_cache=False).tolist()[0]
    assert greedy[:2] == [A, A]
    hyps = beam_search_hypotheses(model, src, 2, BOS, EOS, 4, length_penalty=0.0, use_cache=False)
    assert hyps[0][0].tokens == [B]
    assert hyps[0][0].score == pytest.approx(math.log(0.4) + math.log(0.9), abs=1e-6)
