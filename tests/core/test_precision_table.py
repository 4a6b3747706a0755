"""The precision table (`transformer.core.precision`): the settings' values, training's autocast, CTranslate2's compute
types and the one resolver of `auto` all come from it."""

import subprocess
import sys

import pytest
import torch

from transformer.compute import hardware
from transformer.compute.auto import resolve
from transformer.compute.runtime import autocast
from transformer.core import config, precision
from transformer.core.precision import AUTO, PRECISIONS, named


def test_the_settings_take_their_values_from_the_table():
    assert config.choices(config.Precision) == ("fp32", "bf16", "fp16", "auto")
    assert config.choices(config.InferencePrecision) == ("fp32", "bf16", "int8", "auto")
    assert set(config.choices(config.Quantization)) == {"none", "int8", "int8_float32", "bfloat16"}
    trains = {name for name, kind in PRECISIONS.items() if kind.trains}
    assert set(config.choices(config.Precision)) == trains | {AUTO}


def test_ctranslate2_decodes_in_the_compute_types_of_the_table():
    assert precision.COMPUTE_TYPES == {"fp32": "float32", "int8": "int8"}
    assert [named(t) for t in ("float32", "int8", "int8_float32", "bfloat16", "float16")] == [
        "fp32",
        "int8",
        "int8",
        "bf16",
        "fp16",
    ]
    assert named("int8_bfloat16") == "int8_bfloat16" and named("float64") == "float64"  # none of ours: as it is


@pytest.mark.parametrize("name", [n for n, kind in PRECISIONS.items() if kind.trains])
def test_autocast_computes_in_the_dtype_of_the_table(name):
    with autocast(torch.device("cpu"), name):
        out = torch.nn.functional.linear(torch.ones(2, 4), torch.ones(3, 4))
    assert out.dtype == getattr(torch, PRECISIONS[name].dtype)


@pytest.mark.parametrize("int8_runs", [True, False])
def test_inference_resolves_auto_to_int8_only_on_a_cpu_that_runs_it(monkeypatch, int8_runs):
    monkeypatch.setattr(hardware, "int8_available", lambda: int8_runs)
    assert resolve(AUTO, "inference", "cpu") == ("int8" if int8_runs else "fp32")
    assert resolve(AUTO, "inference", "cuda") == "fp32"
    assert resolve("bf16", "inference", "cpu") == "bf16"  # an explicit precision as it is


def test_training_resolves_auto_from_whether_bf16_pays(monkeypatch):
    monkeypatch.setattr(hardware, "native_bf16", lambda device_type: device_type == "cuda")
    monkeypatch.setattr(hardware, "bf16_ratio", lambda: pytest.fail("a CPU without native bf16 is not measured"))
    assert resolve(AUTO, "training", "cuda") == "bf16" and resolve(AUTO, "training", "cpu") == "fp32"


@pytest.mark.parametrize(("name", "work"), [("int8", "training"), ("fp16", "inference"), ("fp8", "training")])
def test_a_precision_the_work_does_not_run_is_refused(name, work):
    with pytest.raises(ValueError, match=f"precision={name!r} is not one of .* for {work}"):
        resolve(name, work, "cpu")


def test_the_table_and_the_settings_import_no_torch():
    code = "import sys, transformer.core.precision, transformer.core.config; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"
