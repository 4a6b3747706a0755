"""Beam search under hard lexical constraints (`decoding.constrained`): every phrase in every hypothesis."""

import pytest
import torch

from tests.conftest import tiny_model
from transformer.decoding import SearchOptions, search
from transformer.decoding.constrained import NEG_INF, Phrases, advance, allocate, start, wanted
from transformer.decoding.steering import Controls
from transformer.fast_inference import inference_copy

CONSTRAINTS = [[[5, 6], [9]], [[7]], [], [[10, 11, 12], [13], [14, 15]]]


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=3)


def source(rows: int = 4):
    return torch.randint(3, 40, (rows, 9), generator=torch.Generator().manual_seed(0))


def run(model, src, controls, max_len=16, **settings):
    options = SearchOptions.from_config(**{"strategy": "beam", "beam_size": 4, "n_best": 2, **settings})
    return search(model, src, options, max_len=max_len, controls=controls)


def holds(tokens: list[int], phrase: list[int]) -> bool:
    return any(tokens[i : i + len(phrase)] == phrase for i in range(len(tokens)))


def test_progress_goes_on_starts_gives_up_and_completes():
    phrases = Phrases.pack([[[5, 6], [9]]], torch.device("cpu"))
    ids, lengths = phrases.ids, phrases.lengths
    progress = start(phrases)
    assert wanted(progress, ids).tolist() == [[-1, 5, 9]]
    progress = advance(progress, ids, lengths, torch.tensor([5]))  # starts [5, 6]
    assert (progress.current.item(), progress.matched.item(), progress.bank(lengths).item()) == (0, 1, 1)
    assert wanted(progress, ids).tolist() == [[6, -1, 9]]
    gave_up = advance(progress, ids, lengths, torch.tensor([8]))
    assert (gave_up.current.item(), gave_up.bank(lengths).item()) == (-1, 0)
    progress = advance(progress, ids, lengths, torch.tensor([6]))  # completes it
    assert progress.met.tolist() == [[True, False]] and progress.current.item() == -1
    progress = advance(progress, ids, lengths, torch.tensor([9]))
    assert progress.complete().item() and progress.bank(lengths).item() == 3
    assert wanted(progress, ids).tolist() == [[-1, -1, -1]]


def test_allocation_goes_round_the_banks_best_first():
    bank = torch.tensor([[0, 0, 0, 1, 1, 2]])
    scores = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0, NEG_INF]])
    assert allocate(bank, scores, 4, banks=2).tolist() == [[3, 0, 4, 1]]  # a dead candidate takes no slot


@pytest.mark.parametrize("use_cache", [True, False])
def test_every_hypothesis_holds_every_phrase(model, use_cache):
    found = run(model, source(), Controls(constraints=CONSTRAINTS), use_cache=use_cache)
    for phrases, hyps in zip(CONSTRAINTS, found):
        assert len(hyps) == 2
        for hyp in hyps:
            assert all(holds(hyp.tokens, phrase) for phrase in phrases), (phrases, hyp.tokens)
            assert hyp.score == pytest.approx(hyp.logprob / len(hyp.token_scores), abs=1e-5)
            assert hyp.logprob == pytest.approx(sum(hyp.token_scores), abs=1e-4)


def test_constrained_search_is_the_same_cached_uncached_and_alone(model):
    src, controls = source(), Controls(constraints=CONSTRAINTS)
    batched = [[h.tokens for h in hyps] for hyps in run(model, src, controls)]
    assert batched == [[h.tokens for h in hyps] for hyps in run(model, src, controls, use_cache=False)]
    for i in range(src.size(0)):
        row = torch.tensor([i])
        assert [h.tokens for h in run(model, src[row], controls.rows(row))[0]] == batched[i]


def test_constraints_go_with_a_prefix_and_a_suppressed_token(model):
    controls = Controls(prefixes=[[20], [], [21, 22], []], constraints=CONSTRAINTS, suppress=[[23], [14, 14]])
    for phrases, prefix, hyps in zip(CONSTRAINTS, controls.prefixes, run(model, source(), controls)):
        assert hyps
        for hyp in hyps:
            assert hyp.tokens[: len(prefix)] == prefix and all(holds(hyp.tokens, p) for p in phrases)
            assert 23 not in hyp.tokens and not holds(hyp.tokens, [14, 14])


def test_a_sentence_whose_phrases_do_not_fit_its_limit_gets_no_hypothesis(model):
    controls = Controls(constraints=[[[5, 6, 7, 8, 9, 10]], [[7]]])
    found = run(model, source(2), controls, max_len=5)
    assert found[0] == [] and found[1] and all(holds(h.tokens, [7]) for h in found[1])


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_the_inference_copy_holds_every_phrase_in_each_precision(model, precision):
    copy = inference_copy(model, precision)
    for phrases, hyps in zip(CONSTRAINTS, run(copy, source(), Controls(constraints=CONSTRAINTS))):
        assert hyps and all(holds(h.tokens, p) for h in hyps for p in phrases)
