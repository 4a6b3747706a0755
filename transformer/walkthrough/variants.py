"""Sections 6 and 9 of docs/attention.md: additive vs dot-product attention, and the efficient patterns as masks.

Computed with the attention family of `transformer/models/attention/` (the modules' own scoring, `pattern`
and `weights`); rendered and drawn from the JSON like the other sections.
"""

import math
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from torch import nn

from transformer.core.config import AttentionConfig
from transformer.decoding.heatmaps import save_figure
from transformer.models.attention import attention_weights
from transformer.models.attention.additive import AdditiveAttention
from transformer.models.attention.band import band_pattern
from transformer.models.attention.linformer import LinformerAttention
from transformer.models.attention.local import LocalAttention
from transformer.models.attention.lsh import LSHAttention
from transformer.models.attention.strided import StridedAttention
from transformer.walkthrough.formats import rows

LENGTH = 32  # tokens of the pattern example
KNOBS = AttentionConfig(window=4, stride=8, bucket_size=8, n_hashes=2, rank=8)


@torch.inference_mode()
def additive_vs_dot(hidden: int = 5) -> dict:
    """Seed 001's shapes: 2 queries of size 4, 3 keys of size 3, values of size 2, hidden size 5."""
    torch.manual_seed(42)  # the seed's inputs, drawn as it draws them
    queries, keys, values = torch.rand(1, 2, 4), torch.rand(1, 3, 3), torch.rand(1, 3, 2)
    torch.manual_seed(0)
    w_q, w_k = nn.Linear(4, hidden, bias=False), nn.Linear(3, hidden, bias=False)  # the seed's W_q, W_k
    attn = AdditiveAttention(hidden, 1).eval()  # its score_v is the seed's W_v
    q, k, v = w_q(queries)[:, None], w_k(keys)[:, None], values[:, None]  # (B=1, H=1, T, hidden), values (1, 1, 3, 2)
    add_scores, add_weights = attn.scores(q, k)[0, 0], attn.weights(q, k)[0, 0]
    dot_scores = (q @ k.transpose(-2, -1))[0, 0] / math.sqrt(hidden)
    dot_weights = attention_weights(q, k)[0, 0]
    bound = attn.score_v.abs().sum().item()  # |vᵀ tanh(x)| ≤ Σ|v_i|
    return {
        "queries": rows(queries[0]),
        "keys": rows(keys[0]),
        "values": rows(values[0]),
        "hidden": hidden,
        "projected_queries": rows(q[0, 0]),
        "projected_keys": rows(k[0, 0]),
        "score_v": rows(attn.score_v[0]),
        "additive_scores": rows(add_scores),
        "additive_weights": rows(add_weights),
        "additive_output": rows(attn.attend(q, k, v, None, False)[0, 0]),
        "dot_scores": rows(dot_scores),
        "dot_weights": rows(dot_weights),
        "dot_output": rows(attention_weights(q, k)[0, 0] @ values[0]),
        "score_bound": round(bound, 6),
        "largest_ratio_possible": round(math.exp(2 * bound), 6),  # the most one key can outweigh another
        "scaled_up": _scaled_up(attn, q, k),
    }


def _scaled_up(attn: AdditiveAttention, q: torch.Tensor, k: torch.Tensor, factor: float = 100.0) -> dict:
    """Queries and keys ×factor: the dot-product weights harden to one key, the additive ones stay bounded."""
    return {
        "factor": factor,
        "additive_max": attn.weights(q * factor, k * factor)[0, 0].max(dim=-1).values.tolist(),
        "dot_max": attention_weights(q * factor, k * factor)[0, 0].max(dim=-1).values.tolist(),
    }


@torch.inference_mode()
def patterns(length: int = LENGTH) -> dict:
    """Each efficient variant's allowed (query, key) pairs on `length` tokens, from the modules themselves."""
    torch.manual_seed(0)
    cpu = torch.device("cpu")
    x = torch.randn(1, length, 16)
    out = {"length": length, "knobs": {k: getattr(KNOBS, k) for k in ("window", "stride", "bucket_size", "rank")}}
    band = band_pattern(length, length, KNOBS.window, False, cpu)
    strided = StridedAttention(16, 1, config=KNOBS, max_length=LENGTH).eval()
    lsh = LSHAttention(16, 1, config=KNOBS, max_length=LENGTH).eval()
    q, k, _ = lsh.project_qkv(x)
    hashed = lsh.weights(q, k)[0, 0] > 0  # LSH's mask is implicit: the pairs its dense map gives weight
    buckets = lsh.buckets(k, lsh.n_buckets(length))[0, 0]  # (rounds, T)
    masks = {"band": band, "strided": strided.pattern(length, length, False, cpu), "hashed": hashed}
    for name, module in (("band", LocalAttention(16, 1, config=KNOBS, max_length=LENGTH).eval()), ("strided", strided)):
        out[f"{name}_fast_vs_masked"] = _fast_vs_masked(module, x, masks[name])
    lin = LinformerAttention(16, 1, config=KNOBS, max_length=LENGTH).eval()
    lq, lk, _ = lin.project_qkv(x)
    out["masks"] = {name: ["".join(str(b) for b in r) for r in m.int().tolist()] for name, m in masks.items()}  # rows
    out["pairs"] = {name: int(m.sum()) for name, m in masks.items()} | {"low_rank": length * KNOBS.rank}
    out["buckets"] = buckets.tolist()
    out["n_buckets"] = lsh.n_buckets(length)
    out["low_rank_weights_shape"] = list(lin.weights(lq, lk)[0, 0].shape)
    out["low_rank_e"] = rows(lin.e_proj[:, :length], 4)  # (rank, T): how each projected key mixes positions
    return out


def _fast_vs_masked(module, x: torch.Tensor, mask: torch.Tensor) -> float:
    """Largest gap between the module's blocked path and dense attention under the drawn mask."""
    q, k, v = module.project_qkv(x)
    return (module.attend(q, k, v, None, False) - attention_weights(q, k, mask) @ v).abs().max().item()


def section_additive(a: dict) -> str:
    def table(name: str) -> str:
        lines = [f"| query {i + 1} | " + " | ".join(f"{s:.4f}" for s in r) + " |" for i, r in enumerate(a[name])]
        return "| | key 1 | key 2 | key 3 |\n|---|---|---|---|\n" + "\n".join(lines)

    def vecs(rs) -> str:
        return ", ".join("[" + ", ".join(f"{x:.4f}" for x in r) + "]" for r in rs)

    up = a["scaled_up"]
    return f"""## 6. Additive (Bahdanau) vs scaled dot-product attention (seed 001)

Seed 001's example: 2 queries of size 4, 3 keys of size 3, values of size 2, drawn as the seed draws them
(`torch.manual_seed(42)`, then `torch.rand`). A query and a key of different sizes cannot be dot-multiplied; additive
attention first maps both to a hidden size ({a["hidden"]}) with W_q and W_k (here `nn.Linear` layers, seed 0, as in
the seed's code), then scores vᵀ tanh(W_q q + W_k k). The scoring is the project's `AdditiveAttention` (one head of
size {a["hidden"]}; its `score_v` is the seed's W_v): `scores`, `weights`, and `attend` for the output. The
scaled dot-product side scores the same projected queries and keys with `attention_weights`.

Additive scores vᵀ tanh(W_q q + W_k k):

{table("additive_scores")}

and their softmax:

{table("additive_weights")}

Scaled dot-product scores (W_q q)·(W_k k)/√{a["hidden"]}:

{table("dot_scores")}

and their softmax:

{table("dot_weights")}

Outputs (weights times the values {vecs(a["values"])}): additive **{vecs(a["additive_output"])}**, dot-product
**{vecs(a["dot_output"])}**. With inputs this small both scorings stay soft and near-uniform. The difference shows
when the vectors grow: tanh saturates, so an additive score is at most Σ|v_i| = {a["score_bound"]:.3f} in size and
one key can never outweigh another by more than e^(2·{a["score_bound"]:.3f}) = {a["largest_ratio_possible"]:.1f}×,
whereas a dot product grows with the vectors. Multiplying the queries and keys by {up["factor"]:.0f}, the largest
weight per query becomes {", ".join(f"{w:.3f}" for w in up["dot_max"])} for dot-product attention and
{", ".join(f"{w:.3f}" for w in up["additive_max"])} for additive. The price of additive attention is a tanh of
a hidden-size vector for every query-key pair where dot-product attention does one matrix product (`AdditiveAttention`
builds that term in chunks to keep memory O(T²); see [attention_variants.md](attention_variants.md)).

![additive vs scaled dot-product weights, seed 001's shapes](attention/additive_vs_dot.png)
"""


def section_patterns(p: dict) -> str:
    n, kn, pairs = p["length"], p["knobs"], p["pairs"]
    dense = n * n
    share = ", ".join(f"{name} {pairs[name]} ({100 * pairs[name] / dense:.0f}%)" for name in pairs)
    return f"""## 9. Efficient attention patterns

Full attention scores all {n}×{n} = {dense} query-key pairs. The efficient variants of `transformer/models/attention/`
score fewer; here is which pairs, on a {n}-token example (non-causal, encoder self-attention), taken from the modules:

- **band** (`local`, window w = {kn["window"]}): `band.band_pattern`, |i − j| < w.
- **strided** (`strided`, w = {kn["window"]}, stride s = {kn["stride"]}): `StridedAttention.pattern`, the band plus
  every s-th key (j ≡ s − 1 mod s), which gathers its block.
- **hashed buckets** (`lsh`, chunks of {kn["bucket_size"]}, 2 rounds, {p["n_buckets"]} buckets): the pattern is
  implicit (it depends on the content and on random rotations), so it is probed: the pairs to which
  `LSHAttention.weights` gives weight, i.e. those sharing a bucket in some round. (The fast path approximates this
  with sorted chunks; a query sees itself only when nothing else is there.)
- **low-rank** (`linformer`, rank k = {kn["rank"]}): no mask at all; every query attends to k learned mixtures of
  all {n} positions (`LinformerAttention.weights` is {p["low_rank_weights_shape"][0]}×{p["low_rank_weights_shape"][1]}).
  The panel shows the k×{n} projection E (`e_proj`) that makes the mixtures.

Pairs scored out of {dense}: {share}. The drawn band and strided masks are the ones the fast, blocked code
computes: dense attention under the mask matches `attend` within {p["band_fast_vs_masked"]:.1e} (band) and
{p["strided_fast_vs_masked"]:.1e} (strided).

![band, strided, hashed-bucket and low-rank patterns on {n} tokens](attention/patterns.png)

How fast and how large they are at lengths where it matters (T = 128 … 16,384) is measured by
`scripts/benchmark_attention.py`; see [attention_variants.md](attention_variants.md).
"""


def draw_variants(data: dict, figures: Path) -> None:
    """The figures of sections 6 and 9."""
    a = data["additive_vs_dot"]
    fig, axes = plt.subplots(1, 2, figsize=(6, 2.4))
    for ax, name, title in ((axes[0], "additive_weights", "additive"), (axes[1], "dot_weights", "scaled dot-product")):
        ax.imshow(a[name], cmap="viridis", vmin=0, vmax=1)
        for (i, j), w in _cells(a[name]):
            ax.text(j, i, f"{w:.2f}", ha="center", va="center", color="w", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(3), [f"key {j + 1}" for j in range(3)], fontsize=8)
        ax.set_yticks(range(2), [f"query {i + 1}" for i in range(2)], fontsize=8)
    fig.tight_layout()
    save_figure(fig, figures / "additive_vs_dot.png")

    p = data["patterns"]
    panels = [(p["masks"]["band"], "band"), (p["masks"]["strided"], "strided"), (p["masks"]["hashed"], "hashed")]
    fig, axes = plt.subplots(1, 4, figsize=(11, 3))
    for ax, (m, title) in zip(axes, panels):
        ax.imshow([[int(c) for c in r] for r in m], cmap="Greys", vmin=0, vmax=1)
        ax.set_title(f"{title}: {p['pairs'][title]} pairs", fontsize=9)
        ax.set_xlabel("key", fontsize=8)
    axes[0].set_ylabel("query", fontsize=8)
    axes[3].imshow(p["low_rank_e"], cmap="coolwarm", aspect="auto")
    axes[3].set_title(f"low-rank: E ({p['knobs']['rank']}×{p['length']})", fontsize=9)
    axes[3].set_xlabel("position", fontsize=8)
    fig.tight_layout()
    save_figure(fig, figures / "patterns.png")


def _cells(matrix):
    return [((i, j), w) for i, r in enumerate(matrix) for j, w in enumerate(r)]
