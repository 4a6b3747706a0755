"""Which layers of our engine go int8: the shift and the speed of int8 in each layer kind alone.

For a checkpoint (a run folder) and a split of its corpus, an fp32 inference copy gets the int8 maps of one layer
kind at a time (the output projection over the vocabulary, the decoder's feed-forward, the decoder's attention
projections, the whole encoder), then all of them: int8 as `decoding.precision=int8` runs it. Each variant is scored
against fp32 on the first `--sentences` pairs: the log-probability shift of the reference's tokens (teacher-forced,
mean and largest), the mean over positions of the largest shift over the vocabulary, the share of greedy outputs
identical to fp32's, and the median greedy time over `--rounds` interleaved rounds (`--cpu-time`: the process's CPU
time, which on a loaded machine leaves out the time a one-thread run waited for a core).

    python scripts/precision_layers.py outputs/RUN                  # table
    python scripts/precision_layers.py outputs/RUN --threads 1 --cpu-time
    python scripts/precision_layers.py outputs/RUN --full-range     # 8-bit activations even without VNNI
    python scripts/precision_layers.py outputs/RUN --json           # ... and a JSON last line
"""

import argparse
import json
import statistics
import time

import torch

from transformer.batching import collate
from transformer.checkpoint import load_checkpoint
from transformer.corpus import fetch
from transformer.decoding import greedy_decode
from transformer.fast_inference import inference_copy
from transformer.fast_inference.int8 import Int8Linear
from transformer.fast_inference.kernels import cpu_isa, reduce_range
from transformer.tokenizer import BOS_ID, EOS_ID

KINDS = ("output", "feed-forward", "attention", "encoder", "all")


PARTS = {
    "output": ("output",),
    "encoder": ("encoder",),
    "feed-forward": ("ff",),
    "attention": ("self_attn", "cross_attn"),
}


def variant(model, kind: str, full_range: bool):
    """An inference copy of `model` (a Transformer) with int8 in the layers of `kind` and fp32 elsewhere."""
    int8 = inference_copy(model, "int8")
    for m in int8.modules():
        if isinstance(m, Int8Linear):
            m.reduce_range = m.reduce_range and not full_range
    if kind == "all":
        return int8
    mixed = inference_copy(model)
    owners = [(mixed, int8)] if kind in ("output", "encoder") else list(zip(mixed.decoder, int8.decoder))
    for fp32_owner, int8_owner in owners:
        for name in PARTS[kind]:
            setattr(fp32_owner, name, getattr(int8_owner, name))
    return mixed


@torch.inference_mode()
def shifts(reference, model, batches) -> dict[str, float]:
    """Teacher-forced log-probability shifts of `model` against `reference` over `batches` (nats)."""
    token, worst, largest = [], [], 0.0
    for batch in batches:
        real = batch.tgt_out != reference.pad_id  # (B, T)
        ref = reference(batch.src, batch.tgt_in).log_softmax(-1)  # (B, T, V)
        diff = (model(batch.src, batch.tgt_in).log_softmax(-1) - ref).abs()
        on_reference = diff.gather(-1, batch.tgt_out.unsqueeze(-1)).squeeze(-1)[real]
        token.append(on_reference)
        worst.append(diff.amax(-1)[real])
        largest = max(largest, float(on_reference.max()))
    return {
        "token_shift": float(torch.cat(token).mean()),
        "token_shift_max": largest,
        "vocab_shift": float(torch.cat(worst).mean()),
    }


def greedy(model, batches, max_len: int) -> list[torch.Tensor]:
    with torch.inference_mode():
        return [greedy_decode(model, b.src, bos_id=BOS_ID, eos_id=EOS_ID, max_len=max_len) for b in batches]


def same_share(outputs: list[torch.Tensor], reference: list[torch.Tensor]) -> float:
    """Share of sentences whose greedy ids equal the reference's."""
    same = total = 0
    for out, ref in zip(outputs, reference):
        width = max(out.size(1), ref.size(1))
        out, ref = (torch.nn.functional.pad(t, (0, width - t.size(1))) for t in (out, ref))
        same, total = same + int((out == ref).all(1).sum()), total + out.size(0)
    return same / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="run folder or checkpoint file (a Transformer)")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 = torch's default")
    parser.add_argument(
        "--cpu-time", action="store_true", help="time this process's CPU time (one thread, loaded machine)"
    )
    parser.add_argument("--full-range", action="store_true", help="8-bit activations where 7 bits are the default")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    ckpt = load_checkpoint(args.checkpoint, "cpu")
    pairs = list(fetch(ckpt.config.data, [args.split])[args.split].pairs())[: args.sentences]
    src, tgt = ckpt.tokenizer.encode_src([s for s, _ in pairs]), ckpt.tokenizer.encode_tgt([t for _, t in pairs])
    batches = [collate(src[i : i + args.batch], tgt[i : i + args.batch]) for i in range(0, len(pairs), args.batch)]
    max_len = max(b.tgt_out.size(1) for b in batches) + 10
    fp32 = inference_copy(ckpt.model)
    reference = greedy(fp32, batches, max_len)
    models = {"fp32": fp32} | {kind: variant(ckpt.model, kind, args.full_range) for kind in KINDS}
    clock = time.process_time if args.cpu_time else time.perf_counter
    seconds: dict[str, list[float]] = {name: [] for name in models}
    outputs = {}
    for _ in range(args.rounds):
        for name, model in models.items():
            start = clock()
            outputs[name] = greedy(model, batches, max_len)
            seconds[name].append(clock() - start)
    bits = 7 if reduce_range() and not args.full_range else 8
    print(
        f"{args.checkpoint}, {args.split}: {len(pairs)} sentences, batch {args.batch}, {cpu_isa()}, "
        f"{torch.get_num_threads()} threads, {bits}-bit activations, median of {args.rounds} rounds"
    )
    print(f"{'int8 in':14} {'token shift':>11} {'max':>6} {'vocab shift':>11} {'greedy same':>11} {'greedy s':>8}")
    rows = []
    for name in models:
        row = {"int8": name, **shifts(fp32, models[name], batches)}
        row |= {"greedy_same": same_share(outputs[name], reference), "seconds": statistics.median(seconds[name])}
        rows.append(row)
        print(
            f"{name:14} {row['token_shift']:11.4f} {row['token_shift_max']:6.2f} {row['vocab_shift']:11.4f} "
            f"{row['greedy_same']:11.1%} {row['seconds']:8.2f}"
        )
    if args.json:
        print(json.dumps({"cpu": cpu_isa(), "activation_bits": bits, "rows": rows}))


if __name__ == "__main__":
    main()
