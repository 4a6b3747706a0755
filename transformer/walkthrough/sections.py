"""The numbers of docs/attention.md, section by section, computed with the project's own code.

Everything goes through `transformer.models.attention`, `Transformer`, `greedy_decode` and
`transformer.decoding.heatmaps`; sections 6 and 9 are in `variants.py`, section 7 in `kv_cache.py`.
`scripts/attention_walkthrough.py` writes them to docs/attention_walkthrough.json and renders
the page from that file (`page.py`); tests/walkthrough/test_walkthrough.py recomputes them and compares.
"""

import math
from pathlib import Path

import torch
from omegaconf import OmegaConf

from transformer.core.special_ids import BOS_ID, EOS_ID
from transformer.decoding import greedy_decode
from transformer.decoding.alignment import Aligner, AttentionHead, default_head, model_head
from transformer.decoding.heatmaps import attention_figure, attention_tokens, save_figure
from transformer.models.attention import (
    MultiHeadAttention,
    attention_reference,
    attention_weights,
    causal_mask,
    padding_mask,
)
from transformer.models.transformer import Transformer
from transformer.runs.checkpoint import load_checkpoint
from transformer.runs.run_folder import RunFolder
from transformer.walkthrough.formats import rows
from transformer.walkthrough.kv_cache import kv_cache, small_random_model
from transformer.walkthrough.variants import additive_vs_dot, patterns

FIGURES = "attention"  # PNGs under docs/attention/
SENTENCES = [  # the seeds' classic first, then lines 1, 7 and 10 of Multi30k test_2016_flickr
    ("Il n'est pas aussi grand que son père.", "He is not as tall as his father."),
    ("Un homme avec un chapeau orange regardant quelque chose.", "A man in an orange hat starring at something."),
    ("Un groupe de personnes debout devant un igloo.", "A group of people standing in front of an igloo."),
    (
        "Un homme en gilet est assis dans une chaise et tient des magazines.",
        "A man in a vest is sitting in a chair and holding magazines.",
    ),
]


def five_token() -> dict:
    """Seed 000: 'The quick brown fox jumps', 2-d queries/keys/values; the query of 'quick' against every key."""
    tokens = ["The", "quick", "brown", "fox", "jumps"]
    base = torch.tensor([0.1, 0.5, 0.9, 1.3, 1.7])
    q = torch.stack([base, base + 0.1], dim=1)  # (5, 2): [0.1, 0.2], [0.5, 0.6], ...
    k = torch.stack([base + 0.1, base], dim=1)
    v = torch.stack([base + 0.2, base + 0.3], dim=1)
    q4, k4, v4 = q[None, None], k[None, None], v[None, None]  # (B=1, H=1, T=5, d=2)
    weights = attention_weights(q4, k4)[0, 0]  # (5, 5)
    output = attention_reference(q4, k4, v4)[0, 0]  # (5, 2)
    scores = q[1] @ k.T
    return {
        "tokens": tokens,
        "queries": rows(q),
        "keys": rows(k),
        "values": rows(v),
        "d_k": 2,
        "scores": rows(scores),
        "scaled": rows(scores / math.sqrt(2)),
        "weights": rows(weights[1]),
        "output": rows(output[1]),
        "all_weights": rows(weights),
    }


def three_keys() -> dict:
    """Seed 002: query [1, 0, 2] against three keys; the seed does not scale, the Transformer does."""
    x = torch.tensor([[1.0, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])  # the article's three inputs
    w_q = torch.tensor([[1.0, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]])
    w_k = torch.tensor([[0.0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]])
    w_v = torch.tensor([[0.0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]])
    q, k, v = (x @ w_q)[:1], x @ w_k, x @ w_v
    out = {"inputs": rows(x), "query": rows(q[0]), "keys": rows(k), "values": rows(v), "scores": rows((q @ k.T)[0])}
    for name, scale in (("unscaled", math.sqrt(3)), ("scaled", 1.0)):
        # attention_weights divides by √3; a query multiplied by √3 gives the seed's plain softmax(q·k)
        weights = attention_weights(q[None, None] * scale, k[None, None])[0, 0, 0]
        out[name] = {
            "weights": rows(weights),
            "weighted_values": rows(weights[:, None] * v),
            "output": rows(attention_reference(q[None, None] * scale, k[None, None], v[None, None])[0, 0, 0]),
        }
    out["seed_weights"], out["seed_output"] = [0.0, 0.5, 0.5], rows(0.5 * v[1] + 0.5 * v[2])
    return out


def scaling(dims=(4, 16, 64, 256, 1024), n_queries: int = 200, n_keys: int = 32) -> dict:
    """Seed 003's row scaled and soft-maxed, then what scaling does to random vectors as d_k grows."""
    row = torch.tensor([4.2, 0.1, 0.5, 2.5, -1.5])
    q = torch.tensor([[[[1.0, 0, 0, 0]]]])  # (1, 1, 1, 4): q·k_j = k_j[0], the raw score
    k = torch.zeros(1, 1, 5, 4)
    k[0, 0, :, 0] = row
    out = {
        "row": rows(row),
        "d_k": 4,
        "scaled": rows(row / 2),
        "weights": rows(attention_weights(q, k)[0, 0, 0]),
        "seed_scaled": [2.1, 0.05, 0.25, 1.25, -0.75],
        "seed_weights": [0.45, 0.1, 0.15, 0.2, 0.1],
        "random": [],
    }
    gen = torch.Generator().manual_seed(0)
    for d in dims:
        q = torch.randn(1, 1, n_queries, d, generator=gen)
        k = torch.randn(1, 1, n_keys, d, generator=gen)
        point = {
            "d_k": d,
            "raw_std": (q @ k.transpose(-2, -1)).std().item(),
            "scaled_std": (q @ k.transpose(-2, -1) / math.sqrt(d)).std().item(),
        }
        for name, scale in (("unscaled", math.sqrt(d)), ("scaled", 1.0)):
            w = attention_weights(q * scale, k)[0, 0]  # (n_queries, n_keys)
            jacobian = torch.diag_embed(w) - w[:, :, None] * w[:, None, :]  # ∂w/∂scores per query
            point[f"max_{name}"] = w.max(dim=-1).values.mean().item()
            point[f"grad_{name}"] = jacobian.flatten(1).norm(dim=-1).mean().item()
        out["random"].append({key: round(value, 6) for key, value in point.items()})
    return out


@torch.inference_mode()
def masks() -> dict:
    """Padding and look-ahead masks for a short padded batch, and checks that they hold."""
    model = small_random_model(20, 0, d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])  # the second sentence has two pads
    tgt_in = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 16, 17, 18]])
    padding, causal = padding_mask(src, 0), causal_mask(5)
    logits = model(src, tgt_in)
    changed = tgt_in.clone()
    changed[:, 3] = 19  # a different token at position 3
    diff = (model(src, changed) - logits).abs().amax(dim=(0, 2))  # (T,): largest change per position
    memory, _ = model.encode(src)
    alone, _ = model.encode(src[1:, :3])  # the padded sentence without its pads
    weights = model.cross_attention(src, tgt_in)  # (layers, B, H, T, S)
    return {
        "src": src.tolist(),
        "tgt_in": tgt_in.tolist(),
        "padding": padding[:, 0, 0].int().tolist(),
        "causal": causal.int().tolist(),
        "combined": (causal & padding[1, 0]).int().tolist(),
        "changed_position": 3,
        "change_before": diff[:3].max().item(),
        "change_after": diff[3:].min().item(),
        "alone_vs_batched": (memory[1, :3] - alone[0]).abs().max().item(),
        "weight_on_pads": weights[:, 1, :, :, 3:].max().item(),
    }


@torch.inference_mode()
def multi_head(d_model: int = 256, n_heads: int = 4, batch: int = 2, length: int = 6) -> dict:
    """The shapes through one MultiHeadAttention of the `small` model's size, and its output checked."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model, n_heads).eval()
    x = torch.randn(batch, length, d_model)
    q, k, v = mha.project_qkv(x)  # each (B, H, T, Dh)
    weights = attention_weights(q, k)  # (B, H, T, T)
    heads = weights @ v  # (B, H, T, Dh)
    joined = heads.transpose(1, 2).reshape(batch, length, d_model)  # (B, T, D): heads side by side
    output = mha.out_proj(joined)
    module = mha(q, k, v)  # the module's own path (SDPA)
    shapes = [
        ("x", x),
        ("q, k, v (each)", q),
        ("weights", weights),
        ("per-head outputs", heads),
        ("joined", joined),
        ("output", output),
    ]
    return {
        "d_model": d_model,
        "n_heads": n_heads,
        "d_head": d_model // n_heads,
        "batch": batch,
        "length": length,
        "shapes": [[name, list(t.shape)] for name, t in shapes],
        "parameters": sum(p.numel() for p in mha.parameters()),
        "parameter_shapes": [[name, list(p.shape)] for name, p in mha.named_parameters()],
        "module_vs_reference": (module - output).abs().max().item(),
        "split_join_roundtrip": bool(torch.equal(mha.split_heads(joined), heads)),
    }


@torch.inference_mode()
def translations(
    model: Transformer, tokenizer, sentences=SENTENCES, figures: Path | None = None, head: AttentionHead | None = None
) -> list[dict]:
    """Greedy translations (with and without the cache), each output piece's most attended source piece, the word
    alignment `head` gives (`decoding.alignment`; default: the second-to-last layer's mean), heatmaps with it."""
    head = head or default_head(None, None, None, model.cross_attention_layers)
    aligner = Aligner(model, tokenizer.piece_table("src"), tokenizer.piece_table("tgt"), head)
    out = []
    for number, (source, reference) in enumerate(sentences, start=1):
        src_ids = tokenizer.encode_src([source])[0]
        src = torch.tensor([src_ids + [EOS_ID]])
        limit = 2 * len(src_ids) + 10
        options = dict(bos_id=BOS_ID, eos_id=EOS_ID, max_len=limit)
        ids = {c: greedy_decode(model, src, **options, use_cache=c)[0] for c in (True, False)}
        tgt_ids = [i for i in ids[True].tolist() if i not in (EOS_ID, model.pad_id)]
        tgt_in = torch.tensor([[BOS_ID] + tgt_ids])
        weights = model.cross_attention(src, tgt_in)[:, 0].mean(dim=(0, 1))  # (T, S): mean over layers and heads
        src_pieces, tgt_pieces = attention_tokens(tokenizer, src_ids, tgt_ids)
        peak, where = weights.max(dim=-1)
        words = source.split(), tokenizer.decode_tgt([tgt_ids])[0].split()
        links = aligner.links([src_ids], [tgt_ids])[0]
        item = {
            "source": source,
            "reference": reference,
            "translation": tokenizer.decode_tgt([tgt_ids])[0],
            "cache_equal": bool(torch.equal(ids[True], ids[False])),
            "peaks": [[t, src_pieces[j], round(w, 3)] for t, j, w in zip(tgt_pieces, where.tolist(), peak.tolist())],
            "even_weight": round(1 / len(src_pieces), 3),  # each source piece's weight if attention were uniform
            "alignment": [[words[0][i], words[1][j]] for i, j in links],
            "alignment_head": head.describe(),
            "figure": f"{FIGURES}/cross_{number}.png",
        }
        if figures is not None:
            figure = attention_figure(model, tokenizer, src_ids, tgt_ids, aligner=aligner)
            save_figure(figure, figures / f"cross_{number}.png")
        out.append(item)
    return out


def shown_path(path: Path) -> str:
    """A checkpoint's path as the page shows it: from its run's `outputs/` on, else its file name."""
    parts = path.parts
    return str(Path(*parts[parts.index("outputs") :])) if "outputs" in parts else path.name


def cross_section(checkpoint: str, figures: Path | None) -> dict:
    """Section 8 from a trained checkpoint: which model, how it was trained, how far, and its translations."""
    ckpt = load_checkpoint(checkpoint)
    run = RunFolder.holding(ckpt.path)
    overrides = run.overrides if run else None  # the run's command line, if it is a run
    cfg = ckpt.config
    head = model_head(cfg, None, None, ckpt.model.cross_attention_layers)
    return {
        "checkpoint": shown_path(ckpt.path),
        "overrides": list(OmegaConf.load(overrides)) if overrides and overrides.exists() else [],
        "data": f"{cfg.data.name} {cfg.data.src_lang}→{cfg.data.tgt_lang}",
        "model": {key: cfg.model[key] for key in ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers")},
        "step": int(ckpt.meta.get("step", 0)),
        "val_bleu": ckpt.meta.get("val_bleu"),
        "parameters": sum(p.numel() for p in ckpt.model.parameters()),
        "sentences": translations(ckpt.model.eval(), ckpt.tokenizer, figures=figures, head=head),
    }


def compute(timing_rounds: int) -> dict:
    """Every section that needs no trained model."""
    return {
        "five_token": five_token(),
        "three_keys": three_keys(),
        "scaling": scaling(),
        "masks": masks(),
        "multi_head": multi_head(),
        "additive_vs_dot": additive_vs_dot(),
        "kv_cache": kv_cache(timing_rounds=timing_rounds),
        "patterns": patterns(),
    }
