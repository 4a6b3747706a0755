"""Scores of given translations (`decoding.scoring`): what the search reports for its own output, batch = alone."""

import pytest
import torch

from tests.conftest import tiny_model
from tests.decoding.test_conformance import IMPLEMENTATIONS
from transformer.decoding import SearchOptions, search
from transformer.decoding.scoring import score

EOS = 2


def ending_model():
    """A tiny model whose logits lean towards EOS a little, so that beam hypotheses end with it."""
    model = tiny_model(seed=3)
    with torch.no_grad():
        eos = model.output.weight[EOS]
        model.decoder_norm.bias += 3.5 * eos / eos.norm()
    return model


def source(rows: int = 4):
    src = torch.randint(3, 40, (rows, 9), generator=torch.Generator().manual_seed(0))
    src[1, 6:] = 0
    return src


@pytest.mark.parametrize("alpha, kind", [(1.0, "power"), (0.6, "gnmt"), (0.0, "none")])
def test_a_beam_hypothesis_scores_what_the_beam_reported(alpha, kind):
    model, src = ending_model(), source()
    options = SearchOptions.from_config(
        strategy="beam", beam_size=4, n_best=4, length_penalty=alpha, length_penalty_kind=kind
    )
    found = search(model, src, options, max_len=30)
    compared, lengths = 0, set()
    for i, hyps in enumerate(found):
        ended = [h for h in hyps if len(h.token_scores) == len(h.tokens) + 1]  # with EOS
        scored = score(model, src[[i] * len(ended)], [h.tokens for h in ended], options)
        for hyp, got in zip(ended, scored):
            assert got.score == pytest.approx(hyp.score, abs=1e-5)
            assert got.logprob == pytest.approx(hyp.logprob, abs=1e-5)
            assert got.token_scores == pytest.approx(hyp.token_scores, abs=1e-5)
            compared, lengths = compared + 1, lengths | {len(hyp.tokens)}
    assert compared >= 4 and len(lengths) > 1


@pytest.mark.parametrize("name", ["pre-norm", "rnn-gru-additive", "ensemble"])
def test_a_target_scores_the_same_alone_and_in_a_padded_batch(name):
    model, src = IMPLEMENTATIONS[name].model(), torch.randint(3, 20, (3, 7), generator=torch.Generator().manual_seed(1))
    targets = [[5, 6, 7, 8], [9], [10, 11]]
    options = SearchOptions.from_config(strategy="beam", eos_id=EOS)
    batched = score(model, src, targets, options)
    for i, target in enumerate(targets):
        (alone,) = score(model, src[i : i + 1], [target], options)
        assert alone.token_scores == pytest.approx(batched[i].token_scores, abs=1e-5)
        assert len(alone.token_scores) == len(target) + 1
