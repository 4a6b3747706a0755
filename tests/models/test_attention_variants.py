"""Attention variants: exact where they should be, causal where used causally, cached = uncached, config errors."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

import transformer.models.attention.additive as additive
from tests.conftest import tiny_model
from transformer.cli.checks import check_config
from transformer.core.config import AttentionConfig, ModelConfig
from transformer.core.errors import UserError
from transformer.models.attention import VARIANTS, build_attention, padding_mask, usable
from transformer.models.factory import build_model
from transformer.models.transformer import Transformer
from transformer.runs.checkpoint import load_checkpoint

PAD = 0
DECODER = [n for n in VARIANTS if usable(n, "decoder")]
CROSS = [n for n in VARIANTS if usable(n, "cross")]


def model_with(seed=0, **attention) -> Transformer:
    """A tiny model whose attention settings are `attention` (small window/stride so patterns matter)."""
    knobs = dict(window=3, stride=2, bucket_size=4, rank=8)
    return tiny_model(seed, attention=AttentionConfig(**{**knobs, **attention}))


def pair(name: str, **knobs) -> tuple:
    """`dot` and `name` modules holding the same projection weights."""
    torch.manual_seed(0)
    dot = build_attention("dot", 32, 4, 0.0, AttentionConfig(**knobs), 1024).eval()
    other = build_attention(name, 32, 4, 0.0, AttentionConfig(**knobs), 1024).eval()
    other.load_state_dict(dot.state_dict(), strict=False)
    return dot, other


@pytest.mark.parametrize("name, knobs", [("local", dict(window=9)), ("strided", dict(window=2, stride=1))])
@pytest.mark.parametrize("causal", [False, True])
def test_full_coverage_patterns_equal_dot(name, knobs, causal):
    dot, other = pair(name, **knobs)
    x = torch.randn(3, 9, 32)
    tokens = torch.randint(3, 9, (3, 9))
    tokens[1, 6:] = PAD
    mask = None if causal else padding_mask(tokens, PAD)
    expected = dot(*dot.project_qkv(x), mask=mask, is_causal=causal)
    got = other(*other.project_qkv(x), mask=mask, is_causal=causal)
    real = slice(None) if causal else tokens != PAD
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["local", "strided"])
def test_narrow_patterns_differ_from_dot(name):
    dot, other = pair(name, window=2, stride=4)
    x = torch.randn(2, 12, 32)
    assert not torch.allclose(other(*other.project_qkv(x)), dot(*dot.project_qkv(x)), atol=1e-3)


def test_band_and_strided_direct_paths_equal_their_masked_form():
    for name in ("local", "strided"):
        _, attn = pair(name, window=3, stride=4)
        for x, causal in (
            (torch.randn(2, 13, 32), False),
            (torch.randn(2, 13, 32), True),
            (torch.randn(2, 2, 32), True),
        ):
            q, k, v = attn.project_qkv(x)
            dense = attn.weights(q, k, None, causal) @ v  # shorter than the stride too
            torch.testing.assert_close(attn.attend(q, k, v, None, causal), dense, atol=1e-5, rtol=1e-5)


def test_additive_chunks_equal_one_piece(monkeypatch):
    _, attn = pair("additive")
    x = torch.randn(2, 7, 32)
    whole = attn(*attn.project_qkv(x), is_causal=True)
    monkeypatch.setattr(additive, "CHUNK", 1)  # one query row at a time
    torch.testing.assert_close(attn(*attn.project_qkv(x), is_causal=True), whole, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", ["linformer", "lsh", "local", "additive"])
def test_encoder_ignores_padding(name):
    model = model_with(encoder=name)
    src = torch.randint(3, 40, (1, 10))
    src[0, 6:] = PAD
    longer = torch.cat([src, torch.zeros(1, 5, dtype=torch.long)], dim=1)
    a, _ = model.encode(src)
    b, _ = model.encode(longer)
    torch.testing.assert_close(a[:, :6], b[:, :6], atol=1e-5, rtol=1e-5)


def src_batch():
    src = torch.randint(3, 40, (3, 9), generator=torch.Generator().manual_seed(1))
    src[1, 5:] = PAD
    return src


@pytest.mark.parametrize("name", DECODER)
def test_prefix_forcing_into_the_cache_is_causal(name):
    model, src = model_with(decoder=name), src_batch()
    tgt = torch.randint(3, 40, (3, 6))
    memory, mask = model.encode(src)
    whole = model.decode(tgt, memory, mask)
    cache = model.init_cache(memory, 1, 10)
    first = model.decode(tgt[:, :2], memory, mask, cache)  # one call, two new positions
    rest = model.decode(tgt[:, 2:], memory, mask, cache)  # four more at once
    torch.testing.assert_close(torch.cat([first, rest], dim=1), whole, atol=1e-5, rtol=1e-5)


def test_local_cache_slides_and_stays_bounded():
    """`local` decoding holds at most 2w positions; stepping past them, or forcing more at once, changes nothing."""
    model, src = model_with(decoder="local"), src_batch()  # window 3
    tgt = torch.randint(3, 40, (3, 20), generator=torch.Generator().manual_seed(2))
    memory, mask = model.encode(src)
    whole = model.decode(tgt, memory, mask)
    cache = model.init_cache(memory, 1, 64)
    steps = [model.decode(tgt[:, t : t + 1], memory, mask, cache) for t in range(12)]
    assert cache.buffer.size(2) == 6 and cache.filled <= 6 and cache.length == 12
    steps.append(model.decode(tgt[:, 12:], memory, mask, cache))  # 8 new positions: more than the buffer holds
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=1e-5)
    dot_cache = model_with().init_cache(memory, 1, 64)
    assert dot_cache.buffer.size(2) == 64  # the whole prefix for every other variant


@pytest.mark.parametrize("use", ["encoder", "cross"])
def test_weights_are_distributions(use):
    name = {"encoder": "lsh", "cross": "linformer"}[use]
    model, src = model_with(**{use: name}), src_batch()
    weights = model.self_attention(src) if use == "encoder" else model.cross_attention(src, src[:, :5])
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))


def test_local_self_attention_weights_show_the_band():
    model, src = model_with(encoder="local"), src_batch()
    weights = model.self_attention(src)[:, 0]  # (layers, H, S, S) of an unpadded sentence
    far = torch.ones(9, 9, dtype=torch.bool).triu(3) | torch.ones(9, 9, dtype=torch.bool).tril(-3)
    assert weights[..., far].abs().max() == 0 and weights[..., ~far].min() > 0


def test_checkpoint_configs_rebuild_old_and_new():
    class Tok:
        src_vocab_size = tgt_vocab_size = 40
        joint = True

    old = OmegaConf.create({"d_model": 32, "n_heads": 4, "d_ff": 64})
    assert build_model(old, Tok()).config.attention == AttentionConfig()
    new = OmegaConf.create({"d_model": 32, "n_heads": 4, "attention": {"encoder": "local", "window": 5}})
    model = build_model(new, Tok())
    assert type(model.encoder[0].self_attn).__name__ == "LocalAttention" and model.config.attention.window == 5


@pytest.mark.parametrize(
    "attention, message",
    [
        (dict(decoder="linformer"), "model.attention.decoder=linformer cannot serve decoder attention; valid: dot, "),
        (dict(cross="lsh"), "model.attention.cross=lsh cannot serve cross attention"),
        (dict(encoder="sparse"), "model.attention.encoder='sparse' is not one of dot, additive, local"),
        (dict(window=0), "model.attention.window=0 must be at least 1"),
        (dict(rank=0), "model.attention.rank=0 must be at least 1"),
    ],
)
def test_config_errors(attention, message):
    cfg = OmegaConf.create({"model": ModelConfig(attention=AttentionConfig(**attention))})
    with pytest.raises(UserError, match=message.replace("(", r"\(")) as err:
        check_config(cfg)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_variants_train_evaluate_translate_through_the_console_scripts(corpus, tmp_path):
    from tests.cli.test_cli import run

    (train_src, train_tgt), (val_src, val_tgt), (test_src, test_tgt) = corpus["train"], corpus["val"], corpus["test"]
    data = ["data=files", f"data.train.src={train_src}", f"data.train.tgt={train_tgt}", f"data.val.src={val_src}"]
    data += [f"data.val.tgt={val_tgt}", f"data.prepared_dir={tmp_path / 'prepared'}", "data.tokenizer.vocab_size=60"]
    choices = {  # every variant in every use it can serve, over three runs
        "a": ["model.attention.encoder=local", "model.attention.decoder=additive", "model.attention.cross=linformer"],
        "b": ["model.attention.encoder=lsh", "model.attention.decoder=strided", "model.attention.cross=additive"],
        "c": ["model.attention.encoder=linformer", "model.attention.decoder=local", "model.attention.window=4"],
    }
    for name, overrides in choices.items():
        run_dir = tmp_path / name
        train = ["model=tiny", "trainer.max_steps=3", "trainer.val_every=3", "trainer.batch_tokens=512"]
        run(
            "transformer-train",
            *data,
            *train,
            "trainer.progress=false",
            *overrides,
            f"hydra.run.dir={run_dir}",
            cwd=tmp_path,
        )
        saved = load_checkpoint(str(run_dir)).config.model.attention
        for override in overrides:
            key, value = override.removeprefix("model.attention.").split("=")
            assert str(saved[key]) == value
        evaluate = run(
            "transformer-evaluate",
            f"checkpoint={run_dir}",
            f"src_file={test_src}",
            f"ref_file={test_tgt}",
            "decoding=beam",
            cwd=tmp_path,
        )
        assert "BLEU = " in evaluate.stdout
        plots = tmp_path / f"plots_{name}"
        translate = run(
            "transformer-translate",
            f"checkpoint={run_dir}",
            "+sentences=[un chat noir]",
            f"plot_attention={plots}",
            cwd=tmp_path,
        )
        assert translate.stdout.strip() and list(plots.glob("*.png"))


@pytest.mark.slow
def test_unusable_choice_stops_training_at_start(corpus, tmp_path):
    (train_src, train_tgt), (val_src, val_tgt) = corpus["train"], corpus["val"]
    data = ["data=files", f"data.train.src={train_src}", f"data.train.tgt={train_tgt}", f"data.val.src={val_src}"]
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "transformer-train"),
            *data,
            f"data.val.tgt={val_tgt}",
            "model.attention.decoder=linformer",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "model.attention.decoder=linformer cannot serve decoder attention; valid:" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("attention", [dict(encoder="lsh", decoder="local", cross="linformer"), dict(cross="additive")])
def test_inference_copy_packs_any_variant(attention):
    from transformer.fast_inference import PackedLinear, inference_copy

    model, src = model_with(**attention), src_batch()
    fast = inference_copy(model)
    with torch.inference_mode():
        torch.testing.assert_close(fast(src, src[:, :6]), model(src, src[:, :6]), atol=1e-4, rtol=1e-4)
    if fast is not model:  # x86-64 with oneDNN: the variants' linear maps are packed, their own code kept
        assert isinstance(fast.decoder[0].cross_attn.q_proj, PackedLinear)
        assert type(fast.decoder[0].cross_attn) is type(model.decoder[0].cross_attn)
