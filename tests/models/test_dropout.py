"""Dropout's cheap CPU mask: a Bernoulli mask of the right rate, independent, seeded, with nn.Dropout's contract."""

import math

import pytest
import torch

from tests.conftest import tiny_model
from transformer.models.dropout import LEVELS, Dropout, dropout_mask

N = 1 << 20


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_the_mask_keeps_each_element_with_probability_1_minus_p(p):
    torch.manual_seed(0)
    dropped = round(p * LEVELS)
    kept = dropout_mask(torch.Size([N]), dropped, torch.device("cpu"), torch.float64)
    rate = 1 - dropped / LEVELS
    assert set(kept.unique().tolist()) == {0.0, 1.0}
    assert abs(kept.mean().item() - rate) < 5 * math.sqrt(rate * (1 - rate) / N)
    both = (1 - kept).view(-1, 4)  # the four draws of one random word: independent, so dropped together with p²
    for i, j in ((0, 1), (0, 3), (1, 2), (2, 3)):
        assert abs((both[:, i] * both[:, j]).mean().item() - (1 - rate) ** 2) < 5 * math.sqrt((1 - rate) ** 2 / (N / 4))


def test_training_scales_the_kept_and_back_propagates_through_the_mask():
    torch.manual_seed(1)
    x = torch.randn(37, 11, requires_grad=True)  # 407 elements: not a multiple of a word's four draws
    dropout = Dropout(0.25)
    y = dropout(x)
    scale = LEVELS / (LEVELS - round(0.25 * LEVELS))
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] * scale)
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() * scale)
    assert 0 < kept.float().mean() < 1


def test_the_same_seed_gives_the_same_mask_and_the_generator_moves_on():
    torch.manual_seed(2)
    state = torch.get_rng_state()
    first, second = Dropout(0.1)(torch.ones(64, 9)), Dropout(0.1)(torch.ones(64, 9))
    torch.set_rng_state(state)
    assert torch.equal(Dropout(0.1)(torch.ones(64, 9)), first)
    assert not torch.equal(first, second)


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_eval_mode_and_the_edge_rates_behave_as_nn_dropout(p):
    x = torch.randn(8, 5)
    assert torch.equal(Dropout(p)(x), torch.nn.Dropout(p)(x))
    assert torch.equal(Dropout(0.3).eval()(x), x)
    assert Dropout(0.3)(torch.ones(0, 4)).shape == (0, 4)


def test_the_model_drops_out_through_it():
    dropouts = [m for m in tiny_model().modules() if isinstance(m, torch.nn.Dropout)]
    assert dropouts and all(isinstance(m, Dropout) for m in dropouts)


@pytest.mark.slow
def test_it_compiles_and_still_drops_half_at_p_half():
    torch.manual_seed(3)
    compiled = torch.compile(Dropout(0.5))
    y = compiled(torch.ones(4096))
    assert set(y.unique().tolist()) == {0.0, 2.0}
    assert 0.4 < (y != 0).float().mean() < 0.6
