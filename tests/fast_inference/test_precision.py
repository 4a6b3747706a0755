"""Inference precision (`decoding.precision`): fp32 exact, bf16 and int8 close to it, every parity kept."""

import dataclasses
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from tests.conftest import tiny_model
from tests.core.test_config import make
from transformer.cli.checks import check_config
from transformer.cli.evaluate import decoding_label
from transformer.compute import hardware
from transformer.core.config import DecodingConfig
from transformer.core.errors import UserError
from transformer.core.precision import SCORED_IN, TRANSLATED_IN
from transformer.decoding import Hypothesis, SearchOptions, greedy_decode, search
from transformer.decoding.ensemble import Ensemble
from transformer.decoding.translator import Translator
from transformer.fast_inference import PackedLinear, decoded_in, inference_copy, kernels
from transformer.fast_inference.int8 import Int8Linear
from transformer.runs.checkpoint import load_checkpoint
from transformer.runs.results_table import decoding, label

needs_x86 = pytest.mark.skipif(not kernels.onednn(), reason="inference copies are made on x86-64 with oneDNN only")
PRECISIONS = ("fp32", "bf16", "int8")
MIN_SAME_GREEDY = 0.9  # share of greedy outputs of bf16 / int8 identical to fp32's, on the trained tiny model
MAX_TOKEN_SHIFT = 0.05  # mean |Δ log-probability| of the reference tokens (nats), teacher-forced
MAX_ROW_ERROR = 0.02  # an int8 product's largest error, relative to |x|_max · |w|_max · K of its row


@pytest.fixture(autouse=True)
def fresh_kernel_choice():
    """Each test sees the kernel choice (and its one log line) made afresh."""
    kernels.runs.cache_clear()
    kernels.not_applied.cache_clear()
    yield
    kernels.runs.cache_clear()


def greedy(model, src: torch.Tensor, **options) -> torch.Tensor:
    with torch.inference_mode():
        return greedy_decode(model, src, bos_id=1, eos_id=2, max_len=12, **options)


def teacher_forced_logp(model, batch) -> torch.Tensor:
    with torch.inference_mode():
        return model(batch.src, batch.tgt_in).log_softmax(-1)  # (B, T, V)


@needs_x86
def test_the_fp32_copy_is_todays_the_relu_fused_and_the_dropouts_gone(trained):
    model, batch = trained
    fast = inference_copy(model, "fp32")
    ff, x = model.decoder[0].ff, torch.randn(5, 3, model.d_model)
    with torch.inference_mode():
        separate = PackedLinear.of(ff.fc2)(F.relu(PackedLinear.of(ff.fc1)(x)))
        assert torch.equal(fast.decoder[0].ff(x), separate)  # fused ReLU: the same bits
        torch.testing.assert_close(fast(batch.src, batch.tgt_in), model(batch.src, batch.tgt_in), atol=1e-5, rtol=1e-5)
    assert not any(isinstance(m, torch.nn.Dropout) for m in fast.modules())
    assert any(isinstance(m, torch.nn.Dropout) for m in model.modules())  # the model keeps its own


@needs_x86
@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_bf16_and_int8_stay_close_to_fp32(trained, precision):
    model, batch = trained
    fp32, other = inference_copy(model), inference_copy(model, precision)
    shift = (teacher_forced_logp(other, batch) - teacher_forced_logp(fp32, batch)).abs()
    on_reference = shift.gather(-1, batch.tgt_out.unsqueeze(-1)).squeeze(-1)[batch.tgt_out != 0]
    assert on_reference.mean() <= MAX_TOKEN_SHIFT
    same = (greedy(other, batch.src) == greedy(fp32, batch.src)).all(1).float().mean()
    assert same >= MIN_SAME_GREEDY


@needs_x86
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_a_sentences_translation_never_depends_on_its_batch(trained, precision, strategy):
    """Alone, in fours and among all 96 (int8's other kernel from QLINEAR_FROM rows): the same ids, the same scores
    but for the order of fp32 sums (oneDNN blocks a product by its row count)."""
    model, batch = trained
    copy = inference_copy(model, precision)
    options = SearchOptions.from_config(strategy=strategy, beam_size=4, n_best=4, bos_id=1, eos_id=2)

    def searched(src: torch.Tensor) -> list[list[Hypothesis]]:
        with torch.inference_mode():
            return search(copy, src, options, max_len=12)

    together = searched(batch.src)
    assert batch.src.size(0) >= kernels.QLINEAR_FROM
    for size in (1, 4):
        apart = [sentence for part in batch.src.split(size) for sentence in searched(part)]
        assert [[h.tokens for h in s] for s in apart] == [[h.tokens for h in s] for s in together]
        scores = [h.score for s in apart for h in s]
        assert scores == pytest.approx([h.score for s in together for h in s], abs=1e-5)


def row_error_bound(x: torch.Tensor, layer: torch.nn.Linear) -> torch.Tensor:
    """The largest error (N, 1) an int8 product of `layer` may make on the rows of `x`."""
    return MAX_ROW_ERROR * x.abs().amax(1, keepdim=True) * layer.weight.abs().max() * x.size(1)


@pytest.mark.parametrize("rows", [0, 1, 3, 17, kernels.QLINEAR_FROM + 3])
@pytest.mark.parametrize("seed", range(4))
def test_an_int8_row_is_its_own_and_close_to_fp32(rows, seed):
    if not kernels.int8_available():
        pytest.skip("no x86 int8 engine on this CPU")
    g = torch.Generator().manual_seed(seed)
    layer = torch.nn.Linear(24, 40)
    torch.nn.init.normal_(layer.weight, generator=g)
    x = torch.randn(rows, 24, generator=g) * torch.logspace(-3, 3, rows)[:, None]  # rows of very different sizes
    int8 = Int8Linear.of(layer)
    with torch.inference_mode():
        out = int8(x)
        assert out.shape == (rows, 40)
        others = torch.randn(rows, 24, generator=g) * 1e3
        for i in range(rows):  # row i among other rows, and alone (another kernel from QLINEAR_FROM rows)
            assert torch.equal(int8(torch.cat([others[:i], x[i : i + 1], others[i + 1 :]]))[i], out[i])
            assert torch.equal(int8(x[i : i + 1])[0], out[i])
        assert ((out - F.linear(x, layer.weight, layer.bias)).abs() <= row_error_bound(x, layer)).all()


def test_int8_runs_qlinear_from_its_batch_size_where_the_cpu_has_it_and_both_kernels_give_the_same_bits():
    if not kernels.int8_available():
        pytest.skip("no x86 int8 engine on this CPU")
    g = torch.Generator().manual_seed(0)
    layer, x = torch.nn.Linear(24, 40), torch.randn(kernels.QLINEAR_FROM, 3, 24, generator=g)
    int8 = Int8Linear.of(layer)
    with torch.inference_mode():
        small = int8(x[:5])  # (5, 3, 40): five sentences of three positions, fifteen rows
        assert int8.qpacked is None and int8.packed is not None
        large = int8(x)
        assert (int8.qpacked is not None) == kernels.qlinear_available()
        assert torch.equal(large[:5], small)


@pytest.mark.parametrize("qlinear_from", [None, 0])  # linear_dynamic, qlinear
def test_a_relus_output_is_rounded_twice_as_finely(qlinear_from):
    if not kernels.int8_available() or (qlinear_from == 0 and not kernels.qlinear_available()):
        pytest.skip("this int8 kernel does not run on this CPU")
    g = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(256, 64)
    x = torch.randn(kernels.QLINEAR_FROM + 8, 256, generator=g).relu()  # never negative, as after fc1's ReLU
    error = {}
    for after_relu in (False, True):
        int8 = Int8Linear.of(layer, after_relu=after_relu)
        int8.qlinear_from = qlinear_from
        with torch.inference_mode():
            error[after_relu] = (int8(x) - F.linear(x, layer.weight, layer.bias)).abs().mean()
    assert error[True] < 0.7 * error[False]  # half the activation's rounding; the weight's stays
    copy = inference_copy(tiny_model(), "int8")
    relu_inputs = {name for name, m in copy.named_modules() if isinstance(m, Int8Linear) and m.after_relu}
    assert relu_inputs == {name for name, _ in copy.named_modules() if name.endswith("ff.fc2")} != set()


def test_weights_are_quantized_once_per_kernel_and_copy(monkeypatch):
    if not kernels.int8_available():
        pytest.skip("no x86 int8 engine on this CPU")
    from transformer.fast_inference import int8

    calls, quantize = [], int8.quantized_weight
    monkeypatch.setattr(int8, "quantized_weight", lambda w: calls.append(w) or quantize(w))
    model = inference_copy(tiny_model(), "int8")
    src = torch.randint(3, 40, (4, 6), generator=torch.Generator().manual_seed(0))
    large = src.repeat(kernels.QLINEAR_FROM, 1)  # int8's other kernel, where the CPU has it
    greedy(model, src), greedy(model, large)
    modules = [m for m in model.modules() if isinstance(m, Int8Linear)]
    packed = sum((m.packed is not None) + (m.qpacked is not None) for m in modules)
    assert len(calls) == packed > 0
    greedy(model, src), greedy(model, src[:2]), greedy(model, large), greedy(model, src[1:2])
    assert len(calls) == packed


@needs_x86
def test_the_copy_says_once_which_kernel_runs(caplog):
    caplog.set_level(logging.INFO, logger="transformer.fast_inference")
    for _ in range(2):
        inference_copy(tiny_model(), "int8")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and messages[0].startswith("inference: int8 ")
    if kernels.int8_available():
        assert messages[0] == f"inference: int8 via {kernels.int8_kernels()} ({kernels.cpu_isa()})"


@needs_x86
@pytest.mark.parametrize("precision, probe", [("bf16", "native_bf16"), ("int8", "int8_available")])
def test_a_precision_the_cpu_lacks_runs_as_fp32_with_one_warning(precision, probe, monkeypatch, caplog):
    monkeypatch.setattr(kernels, probe, lambda *device_type: False)
    model = tiny_model()
    src, tgt = torch.randint(3, 40, (3, 6)), torch.randint(3, 40, (3, 5))
    copies = [inference_copy(model, precision) for _ in range(2)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(f"inference: {precision} unavailable on this CPU")
    with torch.inference_mode():
        assert torch.equal(copies[0](src, tgt), inference_copy(model)(src, tgt))


@pytest.mark.skipif(
    not (kernels.onednn() and hardware.native_bf16("cpu")), reason="this CPU has no bf16 products (e.g. AVX2 only)"
)
def test_bf16_runs_packed_bf16_products(trained):
    model, batch = trained
    fast = inference_copy(model, "bf16")
    with torch.inference_mode():
        assert fast(batch.src, batch.tgt_in).dtype == torch.float32
    assert fast.output.packed.dtype == torch.bfloat16


def test_other_devices_and_dtypes_are_searched_as_they_are(caplog):
    model = tiny_model().to(torch.float64)
    assert inference_copy(model, "int8") is model
    assert "precision=int8 applies to float32 models on an x86-64 CPU" in caplog.text


def test_an_unknown_precision_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="precision='fp16' is not one of fp32, bf16, int8, auto"):
        inference_copy(tiny_model(), "fp16")


@needs_x86
def test_translators_and_ensembles_search_in_the_precision_of_the_decoding_settings():
    model = tiny_model()
    translator = Translator(model, tokenizer=None, cfg=DecodingConfig(precision="int8"))
    kinds = {type(m) for m in translator.inference_model.modules()}
    assert (Int8Linear in kinds) == kernels.int8_available() and torch.nn.Linear not in kinds
    ensemble = inference_copy(Ensemble([model, tiny_model(seed=1)]), "int8")
    assert all(isinstance(m.output, type(translator.inference_model.output)) for m in ensemble.members)


def test_the_setting_is_checked_with_the_others():
    check_config(make("translate", ["checkpoint=x", "decoding.precision=int8"]))
    with pytest.raises(UserError, match="decoding.precision='fp16' is not one of fp32, bf16, int8"):
        check_config(make("translate", ["checkpoint=x", "decoding.precision=fp16"]))


@pytest.mark.parametrize("command", ["translate", "serve", "backtranslate"])
def test_the_commands_that_translate_for_a_user_default_to_auto(command):
    assert make(command).decoding.precision == TRANSLATED_IN == "auto"
    assert make(command, ["decoding=greedy"]).decoding.precision == "auto"  # a search group keeps the precision
    assert make(command, ["decoding.precision=fp32"]).decoding.precision == "fp32"


def test_validation_evaluate_and_results_score_in_one_precision_by_default():
    """One checkpoint, split and search give one BLEU: what scores decodes in fp32 unless told otherwise."""
    scored = {make("train").decoding.precision, make("evaluate").decoding.precision, DecodingConfig.precision}
    assert scored | {decoding(preset).precision for preset in ("greedy", "beam")} == {SCORED_IN}
    assert SCORED_IN == "fp32"
    assert make("evaluate", ["decoding.precision=int8"]).decoding.precision == "int8"


@needs_x86
@pytest.mark.parametrize("int8_runs", [True, False])
def test_auto_is_int8_where_it_runs_else_fp32_without_a_warning(int8_runs, monkeypatch, caplog):
    if int8_runs and not kernels.int8_available():
        pytest.skip("PyTorch's x86 int8 engine does not run on this CPU")
    monkeypatch.setattr(hardware, "int8_available", lambda: int8_runs)
    model, expected = tiny_model(), "int8" if int8_runs else "fp32"
    src, tgt = torch.randint(3, 40, (3, 6)), torch.randint(3, 40, (3, 5))
    with torch.inference_mode():
        assert torch.equal(inference_copy(model, "auto")(src, tgt), inference_copy(model, expected)(src, tgt))
    assert inference_copy(model.to(torch.float64), "auto") is model  # another dtype: as it is, and silently
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.slow
def test_translate_runs_in_int8_by_default_through_the_console_script(cli_setup):
    if not kernels.int8_available():
        pytest.skip("PyTorch's x86 int8 engine does not run on this CPU: auto is fp32 here")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "transformer-translate"), cli_setup["ckpt"]],
        input="un chien\nle chat dort\n",
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cli_setup["tmp"],
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "inference: int8 " in result.stderr
    decoding = OmegaConf.to_object(make("translate", [cli_setup["ckpt"]]).decoding)  # the command's own settings
    ckpt = load_checkpoint(cli_setup["ckpt"].removeprefix("checkpoint="))
    int8 = Translator(ckpt.model, ckpt.tokenizer, dataclasses.replace(decoding, precision="int8"))
    assert result.stdout.splitlines() == int8.translate(["un chien", "le chat dort"])


def test_the_search_labels_leave_the_precision_to_what_ran():
    int8, fp32 = (OmegaConf.structured(DecodingConfig(precision=p)) for p in ("int8", "fp32"))
    assert decoding_label(int8) == decoding_label(fp32) == "greedy"  # evaluate adds the precision it ran in
    assert label(DecodingConfig(precision="auto"), "int8") == "greedy, int8"
    assert label(DecodingConfig(strategy="beam"), "fp32") == "beam 5, power α=1.0, fp32"


@needs_x86
@pytest.mark.parametrize("precision", ["fp32", "bf16", "int8", "auto"])
def test_a_translator_states_the_precision_its_copy_runs_in(precision):
    model = tiny_model()
    expected = kernels.runs(precision)  # auto resolved; a precision this CPU lacks: fp32
    assert decoded_in(model, precision) == expected in ("fp32", "bf16", "int8")
    assert Translator(model, tokenizer=None, cfg=DecodingConfig(precision=precision)).precision == expected
    assert decoded_in(model.to(torch.float64), precision) == "float64"  # searched as it is
    assert decoded_in(tiny_model().to(torch.bfloat16), precision) == "bf16"
