"""Steering a search: prefixes, words completed from typed characters, suppressed sequences (`decoding.steering`)."""

import pytest
import torch

from tests.conftest import tiny_model
from transformer.decoding import SearchOptions, search
from transformer.decoding.beam import penalty_divisor
from transformer.decoding.steering import Controls, completions

EOS, PAD = 2, 0
STRATEGIES = [
    dict(strategy="greedy"),
    dict(strategy="beam", beam_size=4, n_best=3),
    dict(strategy="sample", top_k=5),
    dict(strategy="mbr", candidates=4, candidates_from="sample"),
]


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=3)


def source(seed: int = 0, rows: int = 4):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 40, (rows, 9), generator=g)
    src[1, 6:] = PAD
    return src


def run(model, src, controls=None, max_len=14, seed=0, **settings):
    options = SearchOptions.from_config(**settings)
    generator = torch.Generator().manual_seed(seed)
    return search(model, src, options, generator=generator, max_len=max_len, controls=controls)


def full(hyp) -> list[int]:
    """A hypothesis' ids with EOS where it generated one."""
    return hyp.tokens + [EOS] * (len(hyp.token_scores) - len(hyp.tokens))


@pytest.mark.parametrize("settings", STRATEGIES, ids=lambda s: s["strategy"])
def test_every_strategy_starts_with_the_prefix_and_scores_what_follows(model, settings):
    src = source()
    prefixes = [[5, 6, 7], [], [9], [10, 11, 12, 13, 14]]
    found = run(model, src, Controls(prefixes=prefixes), **settings)
    for prefix, hyps in zip(prefixes, found):
        assert hyps
        for hyp in hyps:
            assert hyp.tokens[: len(prefix)] == prefix and hyp.forced == len(prefix)
            own = sum(hyp.token_scores[len(prefix) :])
            if settings["strategy"] != "mbr":  # mbr scores by expected utility
                assert hyp.logprob == pytest.approx(own, abs=1e-5)


def test_a_prefix_of_the_greedy_output_continues_it(model):
    src = source()
    plain = run(model, src, strategy="greedy")
    prefixes = [h[0].tokens[:3] for h in plain]
    steered = run(model, src, Controls(prefixes=prefixes), strategy="greedy")
    for (free,), (forced,) in zip(plain, steered):
        assert forced.tokens == free.tokens
        assert forced.token_scores == pytest.approx(free.token_scores, abs=1e-5)
        assert forced.logprob == pytest.approx(free.logprob - sum(free.token_scores[:3]), abs=1e-5)


def test_beam_divides_what_follows_the_prefix_by_the_whole_length(model):
    src = source()
    found = run(model, src, Controls(prefixes=[[5, 6]] * 4), strategy="beam", beam_size=4, n_best=4)
    for hyps in found:
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for hyp in hyps:
            assert hyp.score == pytest.approx(hyp.logprob / penalty_divisor(len(hyp.token_scores), 1.0), abs=1e-5)


@pytest.mark.parametrize("settings", STRATEGIES[:3], ids=lambda s: s["strategy"])
def test_steered_searches_are_the_same_cached_uncached_and_alone(model, settings):
    src = source(1)
    controls = Controls(prefixes=[[5, 6], [], [7, 8, 9], [3]], suppress=[[4], [11, 12]])
    batched = run(model, src, controls, **settings)
    uncached = run(model, src, controls, use_cache=False, **settings)
    assert [[full(h) for h in hyps] for hyps in batched] == [[full(h) for h in hyps] for hyps in uncached]
    if settings["strategy"] == "sample":
        return  # a row's draws depend on the rows beside it
    for i in range(src.size(0)):
        row = torch.tensor([i])
        alone = run(model, src[row], controls.rows(row), **settings)
        assert [full(h) for h in alone[0]] == [full(h) for h in batched[i]]


@pytest.mark.parametrize("settings", STRATEGIES, ids=lambda s: s["strategy"])
def test_a_suppressed_sequence_never_appears(model, settings):
    src = source(2)
    plain = run(model, src, **settings)
    seen = [h.tokens for hyps in plain for h in hyps if len(h.tokens) >= 3]
    assert seen, "some hypothesis is long enough to take sequences from"
    sequences = [seen[0][:1], seen[-1][1:3]]
    steered = run(model, src, Controls(suppress=sequences), **settings)
    for hyps in steered:
        for hyp in hyps:
            for sequence in sequences:
                n = len(sequence)
                assert all(hyp.tokens[i : i + n] != sequence for i in range(len(hyp.tokens))), (sequence, hyp.tokens)


def test_a_prefix_may_hold_a_suppressed_sequence(model):
    src = source()
    found = run(model, src, Controls(prefixes=[[5, 6]] * 4, suppress=[[5, 6], [6]]), strategy="greedy")
    for (hyp,) in found:
        assert hyp.tokens[:2] == [5, 6] and 6 not in hyp.tokens[2:]


PIECES = ["", "", "", "", "▁pl", "ay", "▁play", "ing", "▁the", "p", "l", "a", "y", "▁p", "▁", "s", "▁dog"]


def test_completions_spell_the_rest_or_start_with_it():
    assert completions(PIECES, "▁pl") == [4, 6, 13, 14]
    assert completions(PIECES, "l") == [10]
    assert completions(PIECES, "ay") == [5, 11]
    assert completions(PIECES, "▁plX") == []  # no piece spells "X": no start of it leads anywhere (found by fuzzing)
    assert completions(PIECES, "▁" + "p" * 101) == []  # too long to look for


@pytest.mark.parametrize("settings", STRATEGIES[:2], ids=lambda s: s["strategy"])
def test_the_first_pieces_spell_the_typed_word(settings):
    model = tiny_model(seed=4, vocab=len(PIECES))
    src = torch.randint(3, len(PIECES), (3, 7), generator=torch.Generator().manual_seed(0))
    controls = Controls(prefixes=[[8], [], [16]], partial=["▁pl", "▁p", "▁"], pieces=PIECES)
    expected = [("▁the", "▁pl"), ("", "▁p"), ("▁dog", "▁")]
    for hyps, (prefix, typed) in zip(run(model, src, controls, **settings), expected):
        for hyp in hyps:
            spelled = "".join(PIECES[t] for t in hyp.tokens[hyp.forced :])
            assert "".join(PIECES[t] for t in hyp.tokens[: hyp.forced]) == prefix
            assert spelled.startswith(typed), (typed, spelled)


def test_a_prefix_must_leave_room_under_the_limit(model):
    with pytest.raises(ValueError, match="rows \\[1\\]"):
        run(model, source(), Controls(prefixes=[[5], [5] * 6, [], []]), max_len=6, strategy="greedy")


@pytest.mark.parametrize("settings", STRATEGIES[:2], ids=lambda s: s["strategy"])
def test_alternatives_differ_in_their_first_piece_and_the_best_is_the_search_itself(model, settings):
    src = source(3)
    prefixes = [[5, 6], [], [9], [10, 11, 12]]
    plain = run(
        model, src, Controls(prefixes=prefixes), **{**settings, "n_best": 1} if "n_best" in settings else settings
    )
    found = run(model, src, Controls(prefixes=prefixes, alternatives=3), **settings)
    for prefix, (best,), hyps in zip(prefixes, plain, found):
        assert len(hyps) == 3
        firsts = [h.tokens[len(prefix)] for h in hyps]
        assert len(set(firsts)) == 3 and all(h.tokens[: len(prefix)] == prefix for h in hyps)
        first_scores = [h.token_scores[len(prefix)] for h in hyps]
        assert first_scores == sorted(first_scores, reverse=True)
        if best.tokens[len(prefix) : len(prefix) + 1] == [firsts[0]]:
            assert hyps[0].tokens == best.tokens
            assert hyps[0].logprob == pytest.approx(best.logprob, abs=1e-5)


def test_alternatives_need_room_for_a_piece_after_the_prefix(model):
    with pytest.raises(ValueError, match="rows \\[0\\]"):
        run(model, source(), Controls(prefixes=[[5] * 5, [], [], []], alternatives=2), max_len=6, strategy="greedy")
