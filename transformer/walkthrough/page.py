"""docs/attention.md's text and figures, drawn from the numbers in docs/attention_walkthrough.json.

The numbers come from `sections.py` and its siblings; nothing here computes attention.
"""

from pathlib import Path

import matplotlib.pyplot as plt
import torch

from transformer.decoding.heatmaps import heatmap, save_figure
from transformer.walkthrough.formats import num
from transformer.walkthrough.kv_cache import section_kv_cache
from transformer.walkthrough.variants import section_additive, section_patterns


def vec(values, digits: int = 4) -> str:
    return "[" + ", ".join(num(x, digits) for x in values) + "]"


def small(x: float) -> str:
    """A difference that should be zero or float rounding."""
    return "0 (exactly)" if x == 0 else f"{x:.1e}"


def matrix(rows, labels=None) -> str:
    """A 0/1 or small integer matrix as a fenced block, one row a line."""
    lines = [(f"{labels[i]:>6} " if labels else "") + " ".join(str(x) for x in row) for i, row in enumerate(rows)]
    return "```\n" + "\n".join(lines) + "\n```"


def intro(checkpoint: str) -> str:
    """The page's opening; `checkpoint` is section 8's model, so the command shown is the one that made the page."""
    return f"""# Attention, run and checked

This page walks through attention with small worked examples, the kind the classic explanations use,
but every number and picture here is produced by the code that trains and runs this project's models:
`attention_weights`, `attention_reference`, `padding_mask`, `causal_mask`, `MultiHeadAttention` and the
additive, local, strided, LSH and Linformer variants from `transformer/models/attention/`, the `Transformer` of
`transformer/models/transformer.py`, `greedy_decode` from `transformer/decoding/` and the heatmaps of
`transformer/decoding/heatmaps.py`. There is no separate toy version.

```bash
python scripts/attention_walkthrough.py --checkpoint {checkpoint}    # a few minutes on a 2-core CPU
```

The script writes every number to `docs/attention_walkthrough.json` and renders this page from it;
`tests/walkthrough/test_walkthrough.py` (part of `make test`) recomputes the numbers with the same functions
(`transformer/walkthrough/`), compares them with the JSON and checks that this page is exactly what the JSON
renders to.
The examples come from five public explanations of attention the project grew from (seeds 000–004, listed at
the end); where their printed numbers are wrong or rounded too far, the page shows the computed value and says so.

In the project a mask is boolean and `True` means "may attend"; the project's attention is
softmax(QKᵀ/√d_k + mask)·V, with masked scores set to −∞ before the softmax.
"""


def section_five_token(f: dict) -> str:
    rows = "\n".join(
        f"| {tok} | {vec(k, 1)} | {vec(v, 1)} | {num(s)} | {num(c)} | {num(w)} |"
        for tok, k, v, s, c, w in zip(f["tokens"], f["keys"], f["values"], f["scores"], f["scaled"], f["weights"])
    )
    return f"""## 1. Five tokens, one query (seed 000)

"The quick brown fox jumps" with two-dimensional queries, keys and values (the seed's made-up
numbers). The query of **quick** is {vec(f["queries"][1], 1)}. It is compared with every key by a dot
product, the products are divided by √d_k = √{f["d_k"]}, and the softmax turns them into weights that
sum to one:

| key token | key | value | q·k | q·k/√{f["d_k"]} | weight |
|---|---|---|---|---|---|
{rows}

The output for **quick** is the weighted sum of the values: **{vec(f["output"])}**. Every key here points
roughly the same way as the query, so the longest key (jumps) wins, but only by a factor of
{num(f["weights"][-1] / f["weights"][0], 2)} over the shortest: with scores this small the softmax stays soft.
The whole 5×5 weight matrix (each row a query):

![self-attention weights of the five-token example](attention/five_token.png)

The seed describes these steps but prints no numbers; the ones above are computed.
"""


def section_three_keys(t: dict) -> str:
    u, s = t["unscaled"], t["scaled"]
    weighted = " + ".join(vec(r, 3) for r in u["weighted_values"])
    return f"""## 2. One query against three keys (seed 002)

The seed's text gives the query {vec(t["query"], 0)} and its scores {vec(t["scores"], 0)}, not the keys
and values; we take those of the article it summarises (three inputs {vec(t["inputs"][0], 0)},
{vec(t["inputs"][1], 0)}, {vec(t["inputs"][2], 0)} times its 4×3 weight matrices), which give exactly
that query and those scores: keys {", ".join(vec(k, 0) for k in t["keys"])}, values
{", ".join(vec(v, 0) for v in t["values"])}.

The seed, like its source, does not scale. Multiplying the query by √3 before `attention_weights`
(which divides by √3) gives its plain softmax(q·k):

- weights **{vec(u["weights"])}**, weighted values {weighted}
- output **{vec(u["output"])}**

**The seed prints the weights as {vec(t["seed_weights"], 1)} (which would give the output
{vec(t["seed_output"], 1)}): rounded so far that the first key seems to vanish; it keeps
{num(u["weights"][0] * 100, 1)}% of the weight.**

The Transformer scales the scores by 1/√3 first, which softens the weights to {vec(s["weights"])} and
gives the output {vec(s["output"])}.
"""


def section_scaling(s: dict) -> str:
    rows = "\n".join(
        f"| {p['d_k']} | {num(p['raw_std'], 2)} | {num(p['scaled_std'], 2)} | {num(p['max_unscaled'], 3)} | "
        f"{num(p['max_scaled'], 3)} | {num(p['grad_unscaled'], 3)} | {num(p['grad_scaled'], 3)} |"
        for p in s["random"]
    )
    n = len(s["random"])
    return f"""## 3. Why divide by √d_k (seed 003)

The seed's row of raw scores {vec(s["row"], 1)}, with d_k = {s["d_k"]}, divided by √{s["d_k"]} = 2 gives
{vec(s["scaled"], 2)} (as the seed says), and `attention_weights` turns that into
**{vec(s["weights"])}**.
**The seed prints {vec(s["seed_weights"], 2)}; that is not the softmax of its own scaled row.**

Why scale at all? With queries and keys of independent unit-variance entries, a dot product sums d_k
terms, so its spread grows like √d_k. Measured on random vectors ({n} sizes, 200 queries against 32 keys
each, seed 0):

| d_k | std of q·k | std of q·k/√d_k | largest weight, unscaled | scaled | ‖∂w/∂s‖, unscaled | scaled |
|---|---|---|---|---|---|---|
{rows}

Unscaled, the softmax drifts towards picking one key (largest weight → 1) and its Jacobian
(diag(w) − wwᵀ, whose norm is in the last columns) shrinks towards zero: little gradient reaches the scores, so
the queries and keys that make them learn slowly. Scaled, the spread stays near 1 and both measures stay about
where they were at d_k = 4.

![softmax with and without scaling as d_k grows](attention/scaling.png)
"""


def section_masks(m: dict) -> str:
    return f"""## 4. Masks

A batch of two source sentences of token ids, the second padded with the pad id 0:

```
{m["src"][0]}
{m["src"][1]}
```

`padding_mask(src, 0)` marks the real tokens (shape (B, 1, 1, S), one row a sentence here); the
encoder's self-attention and the decoder's cross-attention use it, so no query looks at a pad:

{matrix(m["padding"])}

`causal_mask(5)` is the look-ahead mask of the decoder's self-attention: row i (a query) may
attend to columns 0…i (keys), never to a later position:

{matrix(m["causal"])}

Seed 001 combines the two; for the second sentence, `causal_mask(5) & padding_mask(src, 0)[1, 0]` is

{matrix(m["combined"])}

(the project's decoder needs only the causal mask: target pads come after every real token and
the loss skips them). Do the masks work? On a small random `Transformer` (seed 0):

- Changing the target token at position {m["changed_position"]} changes the decoder's outputs at
  positions 0–{m["changed_position"] - 1} by at most **{small(m["change_before"])}**, and those at
  positions ≥ {m["changed_position"]} by at least {num(m["change_after"], 3)}: no position sees its future.
- The second sentence encoded alone, without its pads, matches its padded encoding within
  **{m["alone_vs_batched"]:.1e}** (float rounding), and the cross-attention weight on its pad
  positions is at most **{m["weight_on_pads"]}**.
"""


def section_multi_head(h: dict) -> str:
    rows = "\n".join(f"| {name} | ({', '.join(str(d) for d in shape)}) |" for name, shape in h["shapes"])
    params = ", ".join(f"`{name}` {'×'.join(str(d) for d in shape)}" for name, shape in h["parameter_shapes"])
    return f"""## 5. Multi-head attention: splitting d_model and joining it back

One `MultiHeadAttention` of the `small` model's size (d_model = {h["d_model"]}, {h["n_heads"]} heads, so
d_head = {h["d_model"]} / {h["n_heads"]} = {h["d_head"]}), on a batch of {h["batch"]} sequences of
{h["length"]} vectors. The query, key and value projections each map d_model to d_model; the result is cut
into {h["n_heads"]} slices of {h["d_head"]} (`split_heads`: (B, T, D) → (B, H, T, d_head)), each head
attends on its own, and the heads' outputs are laid side by side again and mixed by the output projection:

| step | shape |
|---|---|
{rows}

The heads together cost what one {h["d_model"]}-wide attention would: the module has {h["parameters"]:,}
parameters ({params}: four {h["d_model"]}×{h["d_model"]} maps and their biases, no key bias, since
softmax cancels it), whatever the number of heads. Its own
forward pass (PyTorch's fused `scaled_dot_product_attention`) matches the step-by-step version above within
**{h["module_vs_reference"]:.1e}**; splitting the joined outputs again gives back the per-head outputs
exactly: **{h["split_join_roundtrip"]}**.
"""


def section_cross(c: dict | None) -> str:
    if not c:
        return "## 8. Cross-attention of a trained model\n\nNot computed yet: run the script with `--checkpoint`.\n"
    parts = []
    for item in c["sentences"]:
        peaks = ", ".join(f"{t} → {s} ({num(w, 2)})" for t, s, w in item["peaks"])
        links = ", ".join(f"{s}–{t}" for s, t in item.get("alignment", []))
        aligned = f"word alignment ({item['alignment_head']}; framed in red): {links}\n\n" if links else ""
        parts.append(
            f"**{item['source']}** → *{item['translation']}* (reference: {item['reference']}; the same with "
            f"and without the cache: {item['cache_equal']})\n\nstrongest source piece per output piece: {peaks}\n\n"
            f"{aligned}![cross-attention: {item['source']}]({item['figure']})\n"
        )
    peaks = [w for item in c["sentences"] for _, _, w in item["peaks"]]
    evens = [item["even_weight"] for item in c["sentences"]]
    focus = (
        f"Averaged over all output pieces of these {len(evens)} sentences, the strongest source piece takes "
        f"{num(sum(peaks) / len(peaks), 2)} of the attention, against {num(sum(evens) / len(evens), 2)} for each "
        "piece if it were spread evenly."
    )
    if c["val_bleu"] is not None and float(c["val_bleu"]) < 10:
        focus += (
            f" **This checkpoint is barely trained (val BLEU {c['val_bleu']}): its attention is nearly uniform and its "
            "translations are not translations, which is what a model looks like before learning. Run the script "
            "with a trained checkpoint for the real picture.**"
        )
    m = c["model"]
    limited = any(o.startswith("trainer.max_steps=") for o in c["overrides"])
    recipe = "(the README's recipe, what `make train` runs" + (", with a step limit)" if limited else ")")
    recipe = recipe if "+experiment=multi30k_cpu_fren" in c["overrides"] else ""
    how = f"`transformer-train {' '.join(c['overrides'])}`" if c["overrides"] else "a run whose command is not known"
    seen = (
        "this model also trained on Tatoeba's everyday sentences, which hold many like it."
        if "+experiment=tatoeba_multi30k" in c["overrides"]
        else "a model trained on captions alone translates it as shown."
    )
    return f"""## 8. Cross-attention of a trained model

The model: `{c["checkpoint"]}`, {c["data"]}, d_model {m["d_model"]}, {m["n_heads"]} heads,
{m["n_encoder_layers"]}+{m["n_decoder_layers"]} layers, {c["parameters"] / 1e6:.1f}M parameters, trained by {how}
{recipe} and saved at step {c["step"]:,} (val BLEU {c["val_bleu"]}). Each translation is
`greedy_decode`'s; each heatmap is `transformer.decoding.heatmaps.attention_figure`: the cross-attention weights of the
teacher-forced translation, averaged over the decoder layers and their heads, one row per output piece (`▁` starts a
word), one column per source piece. Under each sentence, the source piece each output piece attends to most, and
its weight.

Multi30k is image captions: people, animals, clothes, colours, places, all in the present tense. The seeds' classic
"il n'est pas aussi grand que son père" (negation, a comparison, a father) is nothing like them: {seen} The three
caption sentences come from the test_2016_flickr split, which the model never trained on. {focus}

""" + "\n".join(parts)


def sources() -> str:
    return """## Sources (the seeds)

- 000: notes on *Attention Is All You Need* (Vaswani et al., 2017) with the five-token example.
- 001: a blog chapter on attention: intuition, look-ahead and padding masks, additive (Bahdanau) attention with
  code, the French→English heatmap of PyTorch's seq2seq tutorial.
- 002: a from-scratch walk-through of dot-product self-attention (one query against three keys).
- 003: notes on queries, keys and values, scaling, masking, cross-attention and multiple heads.
- 004: *Understanding Attention In Transformers* (Towards AI): band, strided, learnable and low-rank patterns.
"""


def render(data: dict) -> str:
    """The whole page."""
    sections = [
        intro((data.get("cross") or {}).get("checkpoint", "RUN_DIR")),
        section_five_token(data["five_token"]),
        section_three_keys(data["three_keys"]),
        section_scaling(data["scaling"]),
        section_masks(data["masks"]),
        section_multi_head(data["multi_head"]),
        section_additive(data["additive_vs_dot"]),
        section_kv_cache(data["kv_cache"]),
        section_cross(data.get("cross")),
        section_patterns(data["patterns"]),
        sources(),
    ]
    return "\n".join(sections)


def draw(data: dict, figures: Path) -> None:
    """The figures of sections 1, 3 and 7 from the computed numbers."""
    five = data["five_token"]
    fig = heatmap(torch.tensor(five["all_weights"]), five["tokens"], five["tokens"], "self-attention weights, seed 000")
    fig.axes[0].set_xlabel("key")
    fig.axes[0].set_ylabel("query")
    save_figure(fig, figures / "five_token.png")

    points = data["scaling"]["random"]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for name, style in (("unscaled", "o-"), ("scaled", "s-")):
        label = "softmax(q·k)" if name == "unscaled" else "softmax(q·k/√d_k)"
        axes[0].plot([p["d_k"] for p in points], [p[f"max_{name}"] for p in points], style, label=label)
        axes[1].plot([p["d_k"] for p in points], [p[f"grad_{name}"] for p in points], style, label=label)
    for ax, title in zip(axes, ("largest weight of a row (mean)", "‖∂weights/∂scores‖ (mean)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, figures / "scaling.png")

    kv = data["kv_cache"]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    steps = range(1, kv["steps"] + 1)
    ax.plot(steps, [m / 1e6 for m in kv["madds_no_cache"]], "o-", markersize=3, label="without cache")
    ax.plot(steps, [m / 1e6 for m in kv["madds_cache"]], "s-", markersize=3, label="with cache")
    ax.set_xlabel("decoding step")
    ax.set_ylabel("million multiply-adds")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, figures / "kv_cache.png")
