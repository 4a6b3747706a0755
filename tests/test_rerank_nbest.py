"""The rerankers of scripts/rerank_nbest.py: the channel scores are the model's own, and each picks what it should."""

import pytest

from tests.conftest import tiny_model
from transformer.batching import collate
from transformer.bench import rerank
from transformer.loss import loss_sum


def test_channel_scores_are_the_teacher_forced_log_probability_per_token_in_any_batch():
    model = tiny_model(vocab=30)
    src = [[5, 6, 7], [8], [9, 10, 11, 12, 13], []]
    tgt = [[20, 21], [22, 23, 24, 25], [26], [27, 28]]
    together = rerank.channel_scores(model, src, tgt, batch=3)  # sorted by length, padded, in two batches
    for s, t, score in zip(src, tgt, together):
        alone = -loss_sum(model, collate([s], [t]), 0.0).item() / (len(t) + 1)
        assert score == pytest.approx(alone, abs=1e-5)
    assert all(score < 0 for score in together)


def test_noisy_channel_weight_zero_is_the_search_and_a_large_one_the_channel():
    cands = [rerank.Candidate("a", -0.1, -3.0), rerank.Candidate("b", -0.5, -0.2), rerank.Candidate("c", -2, -1)]
    assert rerank.noisy_channel(cands, 0.0) == "a"
    assert rerank.noisy_channel(cands, 100.0) == "b"


def test_mbr_picks_the_consensus_when_flat_and_the_best_scored_when_sharp():
    shared = "a man in a red shirt is riding a bike down the street"
    cands = [
        rerank.Candidate("two dogs play in the snow near a tree", -0.1, 0.0),  # the best score, unlike the rest
        rerank.Candidate(shared, -0.4, 0.0),
        rerank.Candidate(shared.replace("bike", "bicycle"), -0.5, 0.0),
    ]
    assert rerank.mbr(cands, temperature=100.0) == shared
    assert rerank.mbr(cands, temperature=0.01) == cands[0].text
