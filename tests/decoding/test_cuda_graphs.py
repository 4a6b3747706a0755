"""The static-shape searches of `decoding.cuda_graphs` (CUDA graphs on a GPU) against the eager search.

On the CPU the static steps run eagerly (`STATIC_DEVICES` extended to "cpu"), which checks their logic: slots, the
masked fixed-length cache, finished rows; on a GPU the same comparisons run through the recorded graphs.
"""

import pytest
import torch

from tests.conftest import tiny_model
from transformer.core.config import AttentionConfig
from transformer.decoding import SearchOptions, cuda_graphs, search

BOS, EOS, PAD = 1, 2, 0
DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


@pytest.fixture(autouse=True)
def static_on_cpu(monkeypatch):
    monkeypatch.setattr(cuda_graphs, "STATIC_DEVICES", {"cpu", "cuda"})


def sources(seed: int, device: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 40, (6, 9), generator=g)
    src[1, 5:] = PAD
    src[4, 2:] = PAD
    return src.to(device)


def eos_prone(seed: int, device: str):
    """A tiny model whose EOS is likely enough that rows finish at different steps."""
    model = tiny_model(seed=seed, pre_norm=bool(seed % 2))
    with torch.no_grad():
        model.output.weight[EOS] *= 2
    return model.to(device)


def decoded(model, src, limit, static: bool, **options):
    found = search(model, src, SearchOptions.from_config(cuda_graphs=static, **options), max_len=limit)
    return [[(h.tokens, h.score, h.token_scores) for h in hyps] for hyps in found]


def assert_same(static, eager):
    for hs, he in zip(static, eager, strict=True):
        assert [h[0] for h in hs] == [h[0] for h in he]
        for (_, score_s, tokens_s), (_, score_e, tokens_e) in zip(hs, he):
            assert score_s == pytest.approx(score_e, abs=1e-4)
            assert tokens_s == pytest.approx(tokens_e, abs=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed, min_len", [(0, 0), (0, 4), (2, 1), (5, 0)])
def test_static_greedy_equals_eager(seed, min_len, device):
    model, src = eos_prone(seed, device), sources(seed, device)
    limit = torch.tensor([3, 12, 20, 7, 1, 16], device=device)
    options = dict(strategy="greedy", min_len=min_len)
    static, eager = decoded(model, src, limit, True, **options), decoded(model, src, limit, False, **options)
    assert_same(static, eager)
    lengths = [len(h[0][2]) for h in eager]
    assert any(n < cap for n, cap in zip(lengths, limit.tolist())), "no row stopped at EOS: the test checks nothing"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_static_beam_equals_eager(seed, device):
    model, src = eos_prone(seed, device), sources(seed, device)
    limit = torch.tensor([4, 15, 9, 1, 12, 6], device=device)  # sentences leave the batch at different steps
    options = dict(strategy="beam", beam_size=4, n_best=2, min_len=seed % 2)
    assert_same(decoded(model, src, limit, True, **options), decoded(model, src, limit, False, **options))


def test_beam_wider_than_the_vocabulary_equals_eager():
    model, src = eos_prone(0, "cpu"), sources(0, "cpu")
    with torch.no_grad():  # only 3 tokens a search may choose: fewer candidates than hypotheses at the first step
        model.output.weight[5:] = -50 * model.output.weight[5:].abs()
    options = dict(strategy="beam", beam_size=5, n_best=1)
    assert_same(decoded(model, src, 8, True, **options), decoded(model, src, 8, False, **options))


def test_static_search_applies_only_where_its_shapes_hold():
    model, src = tiny_model(), sources(0, "cpu")
    assert cuda_graphs.applies(model, src, SearchOptions.from_config())
    assert not cuda_graphs.applies(model, src, SearchOptions.from_config(cuda_graphs=False))
    assert not cuda_graphs.applies(model, src, SearchOptions.from_config(no_repeat_ngram_size=2))
    assert not cuda_graphs.applies(model, src, SearchOptions.from_config(use_cache=False))
    local = tiny_model(attention=AttentionConfig(decoder="local"))
    assert not cuda_graphs.applies(local, src, SearchOptions.from_config())
    assert not cuda_graphs.applies(model, src[:0], SearchOptions.from_config())
