"""Learning-rate schedules: warmup, the paper's inverse-sqrt decay and the budgeted linear decay."""

import pytest

from transformer.core.config import OptimConfig
from transformer.training.optim import lr_multiplier


def test_inverse_sqrt_peaks_at_warmup_then_decays_by_sqrt():
    cfg = OptimConfig(warmup_steps=100, schedule="inverse_sqrt")
    assert lr_multiplier(cfg, 50, 0.9) == pytest.approx(0.5)  # ignores progress
    assert lr_multiplier(cfg, 100, 0.0) == pytest.approx(1.0)
    assert lr_multiplier(cfg, 400, 0.0) == pytest.approx(0.5)


def test_linear_warms_up_then_reaches_zero_at_the_end_of_the_budget():
    cfg = OptimConfig(warmup_steps=100, schedule="linear")
    assert lr_multiplier(cfg, 1, 0.0) == pytest.approx(0.01)
    assert lr_multiplier(cfg, 100, 0.0) == pytest.approx(1.0)
    decay = [lr_multiplier(cfg, 1000, p) for p in (0.25, 0.5, 0.75, 1.0, 1.2)]
    assert decay == pytest.approx([0.75, 0.5, 0.25, 0.0, 0.0])
