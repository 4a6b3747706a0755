"""Mixed precision: `auto` trains in bf16 only where the device computes it natively and faster than fp32."""

import logging

import pytest
import torch

from transformer.compute import auto, hardware
from transformer.compute.auto import BF16_PAYS_BELOW, resolve
from transformer.compute.runtime import autocast
from transformer.training import trainer

CPU = torch.device("cpu")


@pytest.mark.parametrize("pays", [True, False])
def test_auto_is_bf16_only_where_it_pays(monkeypatch, pays):
    monkeypatch.setattr(auto, "bf16_pays", lambda device_type: pays)
    assert resolve("auto", "training", "cpu") == ("bf16" if pays else "fp32")
    with autocast(CPU, "auto"):
        out = torch.nn.functional.linear(torch.ones(2, 4), torch.ones(3, 4))
    assert out.dtype == (torch.bfloat16 if pays else torch.float32)


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16"])
def test_an_explicit_precision_is_kept(monkeypatch, name):
    monkeypatch.setattr(auto, "bf16_pays", lambda device_type: False)
    assert resolve(name, "training", "cpu") == name


def test_native_bf16_on_cpu_follows_onednn():
    expected = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert hardware.native_bf16("cpu") == expected


def test_emulated_bf16_never_pays_and_is_not_measured(monkeypatch):
    monkeypatch.setattr(hardware, "native_bf16", lambda device_type: False)
    monkeypatch.setattr(hardware, "bf16_ratio", lambda: pytest.fail("measured without native bf16"))
    assert not auto.bf16_pays("cpu") and not auto.bf16_pays("cuda")


@pytest.mark.parametrize("ratio", [0.4, BF16_PAYS_BELOW - 0.01, BF16_PAYS_BELOW, 1.77])
def test_native_cpu_bf16_pays_only_below_the_threshold(monkeypatch, ratio):
    monkeypatch.setattr(hardware, "native_bf16", lambda device_type: True)
    monkeypatch.setattr(hardware, "bf16_ratio", lambda: ratio)
    assert auto.bf16_pays("cpu") == (ratio < BF16_PAYS_BELOW)


def test_native_cuda_bf16_pays_without_a_cpu_measurement(monkeypatch):
    monkeypatch.setattr(hardware, "native_bf16", lambda device_type: True)
    monkeypatch.setattr(hardware, "bf16_ratio", lambda: pytest.fail("a CPU measurement for a GPU"))
    assert auto.bf16_pays("cuda")


def test_linear_ms_measures_both_dtypes_once_and_keeps_the_thread_count():
    threads = torch.get_num_threads()
    ms = hardware.linear_ms()
    assert set(ms) == {"fp32", "bf16"} and all(t > 0 for t in ms.values())
    assert hardware.linear_ms() is ms  # cached: measured once per process
    assert torch.get_num_threads() == threads
    assert hardware.bf16_ratio() == ms["bf16"] / ms["fp32"]


@pytest.mark.parametrize("name", ["auto", "bf16"])
def test_setup_log_says_why_bf16_is_not_used_where_it_is_slower(monkeypatch, caplog, name):
    for module in (hardware, trainer):  # the trainer holds its own names for both
        monkeypatch.setattr(module, "native_bf16", lambda device_type: True)
        monkeypatch.setattr(module, "bf16_ratio", lambda: 1.77)
    with caplog.at_level(logging.INFO):
        trainer.log_setup(torch.nn.Linear(2, 2), 10, name, CPU, 1)
    text = caplog.text
    if name == "auto":
        assert "fp32 (auto: bf16 products take 1.77x fp32's time on this CPU)" in text
    else:
        assert "1.77x fp32's time on this CPU: training is faster with trainer.precision=auto" in text
