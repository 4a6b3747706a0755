"""Mixed precision: `auto` picks bf16 only where the device computes it natively."""

import pytest
import torch

from transformer import runtime
from transformer.runtime import autocast, resolve_precision

CPU = torch.device("cpu")


@pytest.mark.parametrize("native", [True, False])
def test_auto_is_bf16_only_where_the_cpu_has_it(monkeypatch, native):
    monkeypatch.setattr(runtime, "native_bf16", lambda device_type: native)
    assert resolve_precision("auto", CPU) == ("bf16" if native else "fp32")
    with autocast(CPU, "auto"):
        out = torch.nn.functional.linear(torch.ones(2, 4), torch.ones(3, 4))
    assert out.dtype == (torch.bfloat16 if native else torch.float32)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_an_explicit_precision_is_kept(monkeypatch, precision):
    monkeypatch.setattr(runtime, "native_bf16", lambda device_type: False)
    assert resolve_precision(precision, CPU) == precision


def test_native_bf16_on_cpu_follows_onednn():
    expected = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    assert runtime.native_bf16("cpu") == expected
