"""The decoder step compiled ahead of time (`decoding.compiled`): the eager ids, a cache that is keyed, checked and
rebuilt, and the eager engine wherever no package serves. Tiny shapes only: a package builds in under a minute."""

import dataclasses
import logging

import pytest
import torch

from tests.conftest import tiny_model
from tests.models.test_rnn import tiny_rnn
from transformer.bench.tiny import write_checkpoint
from transformer.core.config import AttentionConfig, DecodingConfig
from transformer.decoding import SearchOptions, search
from transformer.fast_inference import compiled, inference_copy, kernels
from transformer.runs.loading import load

pytestmark = [
    pytest.mark.slow,  # each build runs a C++ compiler
    pytest.mark.skipif(not kernels.onednn(), reason="packages are built for x86-64 CPUs"),
]


# Compiled code sums fp32 in another order (~1e-6); in int8 that can move an activation across a rounding boundary:
# one step of a row, ~3e-3 in a log-probability.
ATOL = {"fp32": 1e-4, "int8": 5e-3}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """This module's own package folder (`TRANSFORMER_CACHE`)."""
    with pytest.MonkeyPatch.context() as patch:
        root = tmp_path_factory.mktemp("cache")
        patch.setenv("TRANSFORMER_CACHE", str(root))
        yield root / "compiled"


@pytest.fixture(scope="module")
def steps(trained, cache):
    """The trained model's package in each precision, built once for the module."""
    return {precision: compiled.compiled_step(trained[0], precision) for precision in compiled.PRECISIONS}


@pytest.fixture
def step(steps):
    return steps["fp32"]


def searched(model, src: torch.Tensor, strategy: str):
    options = SearchOptions.from_config(strategy=strategy, beam_size=4, n_best=4, bos_id=1, eos_id=2)
    with torch.inference_mode():
        return search(model, src, options, max_len=12)


@pytest.mark.parametrize("precision", compiled.PRECISIONS)
@pytest.mark.parametrize("strategy", ["greedy", "beam"])
@pytest.mark.parametrize("batch", [1, 5, 96])
def test_the_compiled_step_gives_the_eager_ids(trained, steps, precision, strategy, batch):
    """int8: below and above QLINEAR_FROM rows, where the eager copy runs either of its kernels."""
    model, pairs = trained
    eager, fast = inference_copy(model, precision), inference_copy(model, precision)
    calls = []
    fast.compiled_step = lambda *inputs: calls.append(1) or steps[precision](*inputs)
    src = pairs.src[:batch]
    expected, got = searched(eager, src, strategy), searched(fast, src, strategy)
    assert calls
    assert [[h.tokens for h in s] for s in got] == [[h.tokens for h in s] for s in expected]
    scores = [h.score for s in got for h in s]
    assert scores == pytest.approx([h.score for s in expected for h in s], abs=ATOL[precision])


def test_a_package_is_built_once_then_loaded_from_the_cache(trained, step, cache, monkeypatch):
    assert step is not None
    packages = sorted(p.name for p in cache.iterdir())
    assert len(packages) == 2 * len(compiled.PRECISIONS)
    assert {p.rsplit(".", 1)[1] for p in packages} == {"pt2", "sha256"}
    monkeypatch.setattr(compiled, "_build", lambda *args: pytest.fail("built again"))
    assert compiled.compiled_step(trained[0], "fp32") is not None


def test_the_key_follows_the_weights_precision_torch_and_cpu(trained, monkeypatch):
    model = trained[0]
    key = compiled.package_key(model, "fp32")
    assert compiled.package_key(model, "fp32") == key
    assert compiled.package_key(model, "int8") != key
    other = tiny_model(vocab=30)
    other.load_state_dict(model.state_dict())
    assert compiled.package_key(other, "fp32") == key
    with torch.no_grad():
        other.output.weight[0, 0] += 1e-3
    assert compiled.package_key(other, "fp32") != key
    monkeypatch.setattr(compiled, "cpu_isa", lambda: "another ISA")
    assert compiled.package_key(model, "fp32") != key
    monkeypatch.undo()
    monkeypatch.setattr(torch, "__version__", "0.0.0")
    assert compiled.package_key(model, "fp32") != key


def test_a_partial_or_corrupt_package_is_built_again_never_loaded(trained, step, cache, monkeypatch):
    package = cache / f"step-{compiled.package_key(trained[0], 'fp32')}.pt2"
    digest = package.with_suffix(".sha256")
    whole = package.read_bytes()
    package.write_bytes(whole[:1000])  # a partial package: its digest no longer matches
    assert compiled._cached(package, digest) is None
    package.write_bytes(whole)
    digest.unlink()  # killed between the package and its digest
    assert compiled._cached(package, digest) is None
    package.write_bytes(whole[:1000])
    loads = []
    monkeypatch.setattr(compiled, "CompiledStep", lambda path: loads.append(path.stat().st_size) or step)
    assert compiled.compiled_step(trained[0], "fp32") is step
    assert loads == [package.stat().st_size] and loads[0] > 1000  # only the rebuilt package is loaded
    assert digest.read_text() == compiled._digest(package)


@pytest.mark.parametrize(
    "model, precision, reason",
    [
        (lambda: tiny_rnn(vocab=30), "fp32", "RNNModel models decode eagerly"),
        (lambda: tiny_model(vocab=30, attention=AttentionConfig(cross="local")), "fp32", "only dot attention"),
        (lambda: tiny_model(vocab=30), "bf16", "not bf16"),
        (lambda: tiny_model(vocab=30).bfloat16(), "fp32", "only float32 models on the CPU"),
    ],
)
def test_where_no_package_serves_the_eager_engine_runs_and_says_so(model, precision, reason, cache, caplog):
    with caplog.at_level(logging.INFO, logger="transformer.fast_inference"):
        assert compiled.compiled_step(model(), precision) is None
    assert reason in caplog.text and "the eager engine runs" in caplog.text


def test_a_failed_build_leaves_the_eager_engine_and_no_package(cache, monkeypatch, caplog):
    model = tiny_model(seed=3, vocab=30)

    def no_compiler(*args, **kwargs):
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", no_compiler)
    with caplog.at_level(logging.WARNING, logger="transformer.fast_inference"):
        assert compiled.compiled_step(model, "fp32") is None
    assert "no C++ compiler found" in caplog.text and "the eager engine runs" in caplog.text
    key = compiled.package_key(model, "fp32")
    assert not list(cache.glob(f"*{key}*"))


def test_a_translator_asked_for_it_compiles_its_step_and_translates_as_the_eager_one(tmp_path, cache, caplog):
    loaded = load(str(write_checkpoint(tmp_path / "tiny.safetensors")), device="cpu")
    sentences = ["un chien rouge", "le chat dort dans le parc", "un homme court"]
    cfg = DecodingConfig(strategy="beam", beam_size=3, max_len_b=6, precision="fp32")
    with caplog.at_level(logging.INFO, logger="transformer.fast_inference"):
        fast = loaded.translator(dataclasses.replace(cfg, compiled=True))
    assert "compiling the decoder step ahead of time" in caplog.text
    assert isinstance(fast.inference_model.compiled_step, compiled.CompiledStep)
    assert fast.translate(sentences) == loaded.translator(cfg).translate(sentences)
    assert getattr(loaded.translator(cfg).inference_model, "compiled_step", None) is None  # off by default


@pytest.mark.parametrize("precision", compiled.PRECISIONS)
@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_a_sentences_compiled_translation_never_depends_on_its_batch(trained, steps, precision, strategy):
    """Alone and among 96, padded to the longest (the package's attention sums the padding as exact zeros): the same
    ids; scores as close as the eager encoder's, whose products block by row count."""
    model, pairs = trained
    fast = inference_copy(model, precision)
    fast.compiled_step = steps[precision]
    together = searched(fast, pairs.src, strategy)
    apart = [
        sentence for i in range(pairs.src.size(0)) for sentence in searched(fast, unpadded(pairs.src[i]), strategy)
    ]
    assert [[h.tokens for h in s] for s in apart] == [[h.tokens for h in s] for s in together]
    scores = [h.score for s in apart for h in s]
    assert scores == pytest.approx([h.score for s in together for h in s], abs=ATOL[precision])


def unpadded(row: torch.Tensor) -> torch.Tensor:
    """One source row (S,) without its padding, as a batch of one (1, S')."""
    return row[row != 0][None]
