"""Section 7 of docs/attention.md: greedy decoding with and without the KV cache, work and time per step.

Computed with `greedy_decode` and the model's own cache; rendered from the JSON like the other sections.
"""

import os
import time
import warnings

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from transformer.core.special_ids import BOS_ID, EOS_ID
from transformer.decoding import greedy_decode
from transformer.fast_inference import inference_copy
from transformer.models.transformer import Transformer
from transformer.walkthrough.formats import num


def small_random_model(vocab: int, seed: int, **sizes) -> Transformer:
    """A randomly initialised model (no dropout) for the sections that need no training."""
    torch.manual_seed(seed)
    return Transformer(vocab, vocab, dropout=0.0, pad_id=0, **sizes).eval()


def _counting() -> FlopCounterMode:
    """torch's FLOP counter, taught the CPU kernel of scaled_dot_product_attention (2 products per query-key pair)."""
    kernel = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    return FlopCounterMode(display=False, custom_mapping={kernel: lambda q, k, v, *a, **kw: sdpa_flop_count(q, k, v)})


def _recorded_steps(model: Transformer, src: torch.Tensor, steps: int, use_cache: bool, count: bool):
    """Run greedy_decode (EOS disabled: -1 is never produced) and record each decode call's work or time.

    The search runs on an inference copy (`fast_inference`), as a translator's does, made here so that its
    `decode` can be watched.
    """
    model = inference_copy(model)
    records, decode = [], model.decode

    def recording(*args, **kwargs):
        start = time.perf_counter()
        if not count:
            logits = decode(*args, **kwargs)
            records.append(time.perf_counter() - start)
            return logits
        with _counting() as counter:
            logits = decode(*args, **kwargs)
        records.append(counter.get_total_flops() // 2)  # multiply-adds
        return logits

    model.decode = recording
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="TF32 acceleration")  # the flags' note about Intel GPUs
            with torch.backends.mkldnn.flags(enabled=not count):  # counted runs take the plain F.linear path
                ids = greedy_decode(model, src, bos_id=BOS_ID, eos_id=-1, max_len=steps, use_cache=use_cache)
    finally:
        del model.decode  # the instance attribute; the class's method shows again
    return ids, records


@torch.inference_mode()
def kv_cache(steps: int = 32, src_len: int = 16, timing_rounds: int = 0) -> dict:
    """Greedy decoding with and without the cache on a random model of the `small` size: ids, work, time per step."""
    sizes = dict(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024)
    model = small_random_model(8000, 0, **sizes)
    src = torch.randint(4, 8000, (1, src_len), generator=torch.Generator().manual_seed(0))
    src[0, -1] = EOS_ID
    out = {
        "sizes": sizes,
        "vocab": 8000,
        "src_len": src_len,
        "steps": steps,
        "timing_rounds": timing_rounds,
        "load_average": round(os.getloadavg()[0], 2),
    }
    ids = {}
    for name, use_cache in (("cache", True), ("no_cache", False)):
        ids[name], out[f"madds_{name}"] = _recorded_steps(model, src, steps, use_cache, count=True)
        with _counting() as counter:
            memory, _ = model.encode(src)
            if use_cache:
                model.init_cache(memory, 1, steps)
        out[f"madds_setup_{name}"] = counter.get_total_flops() // 2
        times = [_recorded_steps(model, src, steps, use_cache, count=False)[1] for _ in range(timing_rounds)]
        out[f"ms_{name}"] = [round(1000 * sorted(t)[len(t) // 2], 3) for t in zip(*times)] if times else []
    out["ids_equal"] = bool(torch.equal(ids["cache"], ids["no_cache"]))
    out["ids"] = ids["cache"][0].tolist()
    return out


def section_kv_cache(kv: dict) -> str:
    picks = sorted({1, kv["steps"] // 4, kv["steps"] // 2, kv["steps"]})
    timed = bool(kv["ms_cache"])
    rows = "\n".join(
        f"| {i} | {kv['madds_cache'][i - 1] / 1e6:.2f} | {kv['madds_no_cache'][i - 1] / 1e6:.2f} |"
        + (f" {num(kv['ms_cache'][i - 1], 1)} | {num(kv['ms_no_cache'][i - 1], 1)} |" if timed else "")
        for i in picks
    )
    total_c, total_n = sum(kv["madds_cache"]), sum(kv["madds_no_cache"])
    sizes = kv["sizes"]
    per_token, output = kv["madds_cache"][1] - kv["madds_cache"][0], sizes["d_model"] * kv["vocab"]
    share = num(100 * output / kv["madds_cache"][0], 0)
    head = "| step | M multiply-adds, cache | without cache |" + (" ms, cache | ms, without |" if timed else "")
    timing = (
        f"Time per step (median of {kv['timing_rounds']} rounds, one thread, load average "
        f"{num(kv['load_average'], 1)} on this 2-core machine shared with other jobs: read the ratio, not the "
        f"milliseconds): {num(sum(kv['ms_cache']), 0)} ms for all {kv['steps']} steps with the cache, "
        f"{num(sum(kv['ms_no_cache']), 0)} ms without ({num(sum(kv['ms_no_cache']) / sum(kv['ms_cache']), 1)}×; "
        "step 1 also pays one-off setup). "
        "The time saved is much smaller than the work saved: at this size a step's time is mostly the fixed cost "
        "of launching a few hundred small operations, which both ways pay."
        if timed
        else "Timing was not run (`--timing-rounds 0`)."
    )
    return f"""## 7. The KV cache

When the decoder writes token t it needs the keys and values of tokens 1…t−1 in every layer. Without a cache
each step feeds the whole prefix through the decoder again (and re-projects the source's keys and values for
cross-attention); with the cache (`transformer/models/decoder_cache.py`) a step feeds only the newest
token, appends its keys and values to a buffer, and the source's keys and values are projected once per sentence.

`greedy_decode(..., use_cache=True)` and `use_cache=False` on a randomly initialised model of the `small` size
(d_model {sizes["d_model"]}, {sizes["n_encoder_layers"]}+{sizes["n_decoder_layers"]} layers, vocabulary
{kv["vocab"]}), one source of {kv["src_len"]} tokens, {kv["steps"]} steps (end-of-sentence disabled so both
run the full length): the ids are the same: **{kv["ids_equal"]}**. The work of each `decode` call, counted by
PyTorch's FLOP counter (multiply-adds of every matrix product, attention included):

{head}
|---|---|---|{"---|---|" if timed else ""}
{rows}
| all {kv["steps"]} | {total_c / 1e6:.1f} | {total_n / 1e6:.1f} |{" | |" if timed else ""}

Before the first step both encode the source ({kv["madds_setup_no_cache"] / 1e6:.1f} M); the cache also
projects the source keys and values once ({(kv["madds_setup_cache"] - kv["madds_setup_no_cache"]) / 1e6:.1f} M).
With the cache a step costs about the same at every length: each cached token adds {per_token:,}
multiply-adds (its score and its share of the weighted sum, {sizes["d_model"]} each, in
{sizes["n_decoder_layers"]} layers), and the output layer alone ({sizes["d_model"]} × {kv["vocab"]} =
{output / 1e6:.2f} M) is {share}% of a step. Without it step t redoes all t positions, so the total grows
with the square of the length: {num(total_n / total_c, 1)}× the work over {kv["steps"]} steps.
{timing}

![multiply-adds per decoding step with and without the cache](attention/kv_cache.png)
"""
