import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from tests.conftest import tiny_model
from transformer.core.config import DecodingConfig
from transformer.decoding import Hypothesis, SearchOptions, beam_search, greedy_decode, search
from transformer.decoding.beam import in_place
from transformer.models.decoder_cache import DecoderCache

BOS, EOS, PAD = 1, 2, 0


def greedy(model, src, max_len, eos_id=EOS, use_cache=True) -> Tensor:
    """`greedy_decode` from BOS."""
    return greedy_decode(model, src, bos_id=BOS, eos_id=eos_id, max_len=max_len, use_cache=use_cache)


def hypotheses(model, src, max_len, strategy="beam", generator=None, **options) -> list[list[Hypothesis]]:
    """`search` with the `SearchOptions` named (BOS and EOS by default)."""
    options = SearchOptions.from_config(strategy=strategy, **options)
    return search(model, src, options, generator=generator, max_len=max_len)


def one_best(model, src, max_len, strategy="greedy", **options) -> list[list[int]]:
    """Each sentence's ids as a greedy (or sampling) `search` with any options generated them: EOS included where
    generated (its log-probability counted)."""
    eos = [options.get("eos_id", EOS)]
    hyps = hypotheses(model, src, max_len, strategy, **options)
    return [h.tokens + eos * (len(h.token_scores) - len(h.tokens)) for (h,) in hyps]


def greedy_with_scores(model, src, max_len, eos_id=EOS, use_cache=True) -> tuple[Tensor, list[list[float]]]:
    """`greedy`'s ids and each sentence's token log-probabilities (EOS included where generated)."""
    hyps = hypotheses(model, src, max_len, strategy="greedy", eos_id=eos_id, use_cache=use_cache)
    return greedy(model, src, max_len, eos_id, use_cache), [h[0].token_scores for h in hyps]


def batch_src(seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 40, (4, 9), generator=g)
    src[1, 6:] = PAD
    src[3, 3:] = PAD
    return src


class RowCounter:
    """`model` for the search, noting how many rows each decoder step gets and keeping the last cache."""

    def __init__(self, model):
        self.model, self.rows, self.cache = model, [], None
        self.pad_id, self.max_positions = model.pad_id, model.max_positions

    def eval(self):
        return self

    def encode(self, src):
        return self.model.encode(src)

    def init_cache(self, memory, group, max_len):
        self.cache = self.model.init_cache(memory, group, max_len)
        return self.cache

    def decode(self, tgt_in, memory, src_mask, cache=None):
        self.rows.append(tgt_in.size(0))
        return self.model.decode(tgt_in, memory, src_mask, cache)


@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_decodes_one_row_per_sentence_first_then_its_hypotheses(use_cache):
    counter, src = RowCounter(tiny_model(seed=4)), batch_src(4)
    hypotheses(counter, src, 6, beam_size=3, eos_id=-1, use_cache=use_cache)
    assert counter.rows == [4] + [4 * 3] * 5
    if use_cache:
        assert counter.cache.buffer.size(0) == 4 * 3  # grown once, at the fan-out


@settings(deadline=None, database=None)  # a first call imports and warms up torch kernels
@given(
    st.integers(1, 6).flatmap(
        lambda k: st.lists(st.lists(st.integers(0, k - 1), min_size=k, max_size=k), min_size=1, max_size=4).map(
            lambda p: (k, p)
        )
    )
)
def test_in_place_order_keeps_each_rows_first_extension_in_its_slot(case):
    k, parents = case
    rows = torch.tensor(parents) + torch.arange(len(parents))[:, None] * k  # numbered across the batch
    order = in_place(rows, k)
    assert (order.sort(dim=1).values == torch.arange(k)).all()  # a permutation of each sentence's hypotheses
    placed = rows.gather(1, order) % k
    for b, row in enumerate(parents):
        assert all(placed[b, s] == s for s in set(row))  # a row extended keeps its place: its cache rows stay


def test_beam_moves_only_the_cache_rows_of_second_extensions():
    counter, src, k = RowCounter(tiny_model(seed=6)), batch_src(3), 4  # 4 sentences
    asked = []
    original = DecoderCache.reorder

    def reorder(self, rows, sentences=None):
        asked.append(rows.clone())
        original(self, rows, sentences)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DecoderCache, "reorder", reorder)
        hypotheses(counter, src, 8, beam_size=k, eos_id=-1)
    steady = [rows.view(4, k) for rows in asked[1:]]  # after the fan-out: 4 sentences of k rows, none finished
    assert steady and any(len(set(r.tolist())) < k for rows in steady for r in rows)  # some rows had two children
    slots = torch.arange(4)[:, None] * k
    for rows in steady:
        assert all(rows[b, s] == slots[b, 0] + s for b in range(4) for s in set((rows[b] - slots[b]).tolist()))


@pytest.mark.parametrize("seed", range(8))
def test_cache_reorder_keeps_the_rows_asked_for(seed):
    """Fan-out, shuffles with repeats, the identity and shrinking, as `index_select` of the held rows would give."""
    g = torch.Generator().manual_seed(seed)
    cross = torch.zeros(2, 1, 3, 2)  # 2 sentences, 1 head, 3 source positions, head size 2
    cache = DecoderCache([(cross, cross)], group=1, max_len=5)
    expected = torch.randn(2, 2, 1, 1, 2, generator=g)  # (rows, 2·layers, filled, H, Dh)
    cache.buffer[:, :, :1] = expected
    cache.advance()
    fan_out, shuffle = torch.tensor([0, 0, 0, 1, 1, 1]), torch.randint(0, 6, (6,), generator=g)
    for rows in (fan_out, shuffle, torch.arange(6), torch.randint(0, 6, (3,), generator=g)):
        expected = expected.index_select(0, rows)
        cache.reorder(rows)
        torch.testing.assert_close(cache.buffer[: cache.rows, :, : cache.filled], expected, rtol=0, atol=0)


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
    ids = greedy(model, src, 4, use_cache=False).tolist()[0]
    assert ids[:2] == [A, A]
    hyps = hypotheses(model, src, 4, beam_size=2, length_penalty=0.0, use_cache=False)
    assert hyps[0][0].tokens == [B]
    assert hyps[0][0].score == pytest.approx(math.log(0.4) + math.log(0.9), abs=1e-6)


# A table where the length penalty decides: "B" is the likelier short output,
# "A A" the longer one (p = 0.55·0.8·0.95); "A" alone (0.11) drops out of the beam.
PENALTY_TABLE = {(): {A: 0.55, B: 0.45}, (A,): {A: 0.8, EOS: 0.2}, (A, A): {EOS: 0.95, B: 0.05}}
LOG_B, LOG_AA = math.log(0.45), math.log(0.55 * 0.8 * 0.95)


@pytest.mark.parametrize(
    "kind, alpha, expected",
    [
        ("none", 1.0, [([B], LOG_B), ([A, A], LOG_AA)]),
        ("power", 0.0, [([B], LOG_B), ([A, A], LOG_AA)]),
        ("power", 1.0, [([A, A], LOG_AA / 3), ([B], LOG_B / 2)]),  # the penalty lets the longer one win
        ("gnmt", 1.0, [([A, A], LOG_AA / (8 / 6)), ([B], LOG_B / (7 / 6))]),
    ],
)
def test_scripted_beam_scores_for_each_length_penalty(kind, alpha, expected):
    model, src = ScriptedModel(PENALTY_TABLE), torch.tensor([[5, EOS]])
    options = dict(beam_size=2, length_penalty=alpha, length_penalty_kind=kind, n_best=2, use_cache=False)
    hyps = hypotheses(model, src, 6, **options)[0]
    assert [h.tokens for h in hyps] == [tokens for tokens, _ in expected]
    for h, (_, score) in zip(hyps, expected):
        assert h.score == pytest.approx(score, abs=1e-6)
        assert sum(h.token_scores) == pytest.approx(h.logprob, abs=1e-6)


def test_a_finished_short_hypothesis_does_not_stop_the_search():
    # "B EOS" is the top beam after step 2, but with len^1 normalisation "A A EOS" can still
    # (and does) overtake it, so the search must go on.
    model, src = ScriptedModel(PENALTY_TABLE), torch.tensor([[5, EOS]])
    best = beam_search(model, src, beam_size=2, bos_id=BOS, eos_id=EOS, max_len=6, length_penalty=1.0, use_cache=False)
    assert best == [[A, A]]


def test_n_best_is_distinct_and_sorted():
    model, src = tiny_model(seed=11), batch_src(4)
    for hyps in hypotheses(model, src, 12, beam_size=5, n_best=5):
        assert len(hyps) == 5
        assert len({tuple(h.tokens) for h in hyps}) == 5
        assert all(a.score >= b.score for a, b in zip(hyps, hyps[1:]))


def test_per_sentence_max_len_and_min_len():
    model, src = tiny_model(seed=2), batch_src(5)
    limit = torch.tensor([3, 5, 7, 9])
    out = greedy(model, src, limit, eos_id=-1)
    assert [int((row != PAD).sum()) for row in out] == [3, 5, 7, 9]
    beams = beam_search(model, src, beam_size=3, bos_id=BOS, eos_id=-1, max_len=limit)
    assert [len(h) for h in beams] == [3, 5, 7, 9]
    scripted = ScriptedModel({})  # would end at once: EOS has probability 1 everywhere
    assert greedy(scripted, src[:1], 10, use_cache=False).tolist()[0] == [EOS]
    forced = one_best(scripted, src[:1], 10, use_cache=False, min_len=4)[0]
    assert len(forced) == 5 and forced[-1] == EOS and EOS not in forced[:4]


def has_repeat(tokens, n):
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


def test_no_repeat_ngram_blocks_repeats():
    model, src = tiny_model(seed=0), batch_src(0)
    plain = greedy(model, src, 20, eos_id=-1).tolist()
    assert any(has_repeat(row, 2) for row in plain)  # the random model loves repeating itself
    blocked = one_best(model, src, 20, eos_id=-1, no_repeat_ngram_size=2)
    assert not any(has_repeat(row, 2) for row in blocked)
    beams = [hyps[0].tokens for hyps in hypotheses(model, src, 20, beam_size=4, eos_id=-1, no_repeat_ngram_size=2)]
    assert not any(has_repeat(h, 2) for h in beams)


def test_sampling_is_seeded_and_top_k_one_is_greedy():
    model, src = tiny_model(seed=4), batch_src(6)
    ids = one_best(model, src, 15)
    assert one_best(model, src, 15, "sample", top_k=1) == ids

    def draw(seed=3):
        seeded = torch.Generator().manual_seed(seed)
        return one_best(model, src, 15, "sample", top_p=0.9, temperature=1.5, generator=seeded)

    assert draw() == draw() and draw(4) != draw()  # the seed decides the draws


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_every_strategy_returns_the_same_hypothesis_shape(strategy):
    model, src = tiny_model(seed=6), batch_src(7)
    options = SearchOptions.from_config(strategy=strategy, beam_size=3, max_len_a=0.0, max_len_b=12)
    results = search(model, src, options, generator=torch.Generator().manual_seed(0))
    assert len(results) == src.size(0)
    for hyps in results:
        assert hyps and all(isinstance(h, Hypothesis) for h in hyps)
        for h in hyps:
            assert EOS not in h.tokens and BOS not in h.tokens and len(h.tokens) <= 12
            assert len(h.token_scores) in (len(h.tokens), len(h.tokens) + 1)  # EOS scored when generated
            assert sum(h.token_scores) == pytest.approx(h.logprob, abs=1e-4)
    if strategy == "greedy":
        ids = greedy(model, src, 12).tolist()
        assert [hyps[0].tokens for hyps in results] == [[t for t in row if t not in (EOS, PAD)] for row in ids]


def test_search_options_refuse_impossible_settings():
    assert SearchOptions.from_config() == SearchOptions.from_config(DecodingConfig())
    for bad in (
        dict(strategy="topk"),
        dict(beam_size=0),
        dict(strategy="beam", n_best=6),
        dict(temperature=0),
        dict(top_p=0),
    ):
        with pytest.raises(ValueError):
            SearchOptions.from_config(**bad)
