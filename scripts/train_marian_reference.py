"""The quality reference: Hugging Face MarianMT trained the usual way, on our prepared corpus, for a time budget.

The recipe the quality issue describes: MarianMT of the `small` size (d_model 256, 3+3 layers, ffn 1024, 4 heads)
over the prepared directory's SentencePiece vocabulary (joint BPE 8k for Multi30k), label smoothing 0.1, Adam
(0.9, 0.98) with inverse-sqrt warmup over 400 steps to lr 1e-3, batches of ~2.5k tokens, dropout 0.1, fp32.
After `--minutes` of training (the clock counts training only), val and every test split are decoded greedily
with `generate()` and scored with sacreBLEU, so our recipes can be compared with it on the same machine.

    python scripts/train_marian_reference.py data/prepared/multi30k-fr-en-46187a2dd8 --minutes 55 --output ref.md

Needs `transformers` (`pip install -e .[bench]`).
"""

import argparse
import time
from pathlib import Path

import numpy as np
import sacrebleu
import torch
from tqdm import tqdm

from transformer.bench.marian_reference import marian, marian_loss
from transformer.core.files import atomic_write_text
from transformer.core.special_ids import EOS_ID, PAD_ID
from transformer.data.batching import TrainBatches, pad
from transformer.data.preparation import PreparedData
from transformer.training.optim import inverse_sqrt


def train(model, data: TrainBatches, args: argparse.Namespace) -> int:
    """Train for `args.minutes` of wall-clock training time; returns the number of steps."""
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    step, seconds, epoch = 0, 0.0, 0
    bar = tqdm(desc="training MarianMT", unit="step")
    while seconds < 60 * args.minutes:
        for indices in data.epoch(epoch):
            start = time.time()
            batch = data.collate(indices, epoch)
            step += 1
            for group in optimizer.param_groups:
                group["lr"] = args.lr * inverse_sqrt(step, args.warmup)
            loss = marian_loss(model, batch, args.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seconds += time.time() - start
            bar.update()
            bar.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}", minutes=f"{seconds / 60:.1f}")
            if seconds >= 60 * args.minutes:
                break
        epoch += 1
    bar.close()
    return step


@torch.inference_mode()
def translate(model, prepared: PreparedData, src_ids: list[list[int]], batch_size: int) -> list[str]:
    """Greedy `generate()` in batches sorted by length; output in input order."""
    model.eval()
    order = np.argsort([len(s) for s in src_ids], kind="stable")
    hyps: list[str] = [""] * len(src_ids)
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        src = pad([src_ids[i] + [EOS_ID] for i in rows])
        out = model.generate(
            input_ids=src,
            attention_mask=src != PAD_ID,
            num_beams=1,
            do_sample=False,
            max_new_tokens=src.size(1) * 2 + 10,
        )
        ids = [[t for t in seq[1:].tolist() if t not in (PAD_ID, EOS_ID)] for seq in out]  # drop the start token
        for i, text in zip(rows, prepared.tokenizer.decode_tgt(ids)):
            hyps[i] = text
    return hyps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prepared", type=Path, help="a prepared directory: data/prepared/NAME")
    parser.add_argument("--minutes", type=float, default=55.0, help="training time budget")
    parser.add_argument("--batch-tokens", type=int, default=2500)
    parser.add_argument("--max-len", type=int, default=128, help="longer training pairs are dropped, as data.max_len")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=400)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--output", type=Path, default=Path("reference.md"))
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    prepared = PreparedData(args.prepared)
    model = marian("small", prepared.tokenizer.tgt_vocab_size, args.dropout)
    if model is None or not prepared.tokenizer.joint:
        raise SystemExit("needs `transformers` (pip install -e .[bench]) and a joint vocabulary")
    data = TrainBatches.from_dataset(prepared.split("train"), args.max_len, args.batch_tokens, args.seed)
    steps = train(model, data, args)
    rows = []
    for split in [s for s in prepared.meta["splits"] if s != "train"]:  # val and the test splits
        ds = prepared.split(split)
        hyps = translate(model, prepared, ds["src_ids"], 64)
        bleu, chrf = sacrebleu.corpus_bleu(hyps, [ds["tgt"]]), sacrebleu.corpus_chrf(hyps, [ds["tgt"]])
        rows.append(f"| {split} | greedy | {bleu.score:.2f} | {chrf.score:.2f} |")
        print(rows[-1], flush=True)
    header = f"MarianMT small, {args.minutes:g} training minutes, {steps} steps ({args.prepared.name})\n\n"
    table = "| split | decoding | BLEU | chrF |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"
    atomic_write_text(args.output, header + table)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
