"""Rerank a model's beam n-best on val and the test sets: the noisy channel and minimum Bayes risk.

For each sentence the forward model's beam search keeps all `--beam` finished hypotheses; two rerankers pick one:
- noisy channel (Yee et al. 2019, without a language model): the hypothesis' own score (log-probability over
  its length) plus λ times the reverse model's log-probability of the source given the hypothesis, over the
  source's length, for each λ of `--weights` (λ = 0 is plain beam search);
- minimum Bayes risk: the hypothesis with the highest expected sentence BLEU against the others, each weighted by
  softmax(score / T), for each T of `--temperatures`.
It prints BLEU on every set for every setting and marks the setting val chooses (sets are read as
`transformer-results` reads them: the forward checkpoint's test splits, Tatoeba and newstest2014 where its
`data.shared_dir` holds them, val last).

    python scripts/rerank_nbest.py outputs/train_bt/final outputs/train_bt/reverse
    python scripts/rerank_nbest.py FINAL REVERSE --beam 8 --sets val test_2016_flickr --json
"""

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path

import sacrebleu
import torch
from torch import nn
from tqdm import tqdm

from transformer.batching import collate
from transformer.checkpoint import Checkpoint, load_checkpoint
from transformer.cli import CONFIG_PATH
from transformer.results import decoding, test_sets
from transformer.tokenizer import PAD_ID
from transformer.translator import Translator


@dataclass
class Candidate:
    text: str
    score: float  # the forward search's: log-probability over length^α
    channel: float  # the reverse model's log-probability of the source, over the source's length


@torch.no_grad()
def channel_scores(model: nn.Module, src: list[list[int]], tgt: list[list[int]], batch: int = 128) -> list[float]:
    """log p(tgt | src) / (|tgt| + 1) under `model`, teacher-forced (EOS counted), for each pair of id lists;
    for the noisy channel `model` is the reverse one, `src` the hypotheses and `tgt` the sources."""
    out = [0.0] * len(src)
    order = sorted(range(len(src)), key=lambda i: len(src[i]))
    for start in range(0, len(order), batch):
        rows = order[start : start + batch]
        b = collate([src[i] for i in rows], [tgt[i] for i in rows])
        logp = model(b.src, b.tgt_in).float().log_softmax(-1)  # (B, T, V)
        real = b.tgt_out != PAD_ID
        token = logp.gather(2, b.tgt_out[:, :, None]).squeeze(2).masked_fill(~real, 0.0)  # (B, T)
        for i, total, n in zip(rows, token.sum(1).tolist(), real.sum(1).tolist()):
            out[i] = total / n
    return out


def nbest(forward: Checkpoint, reverse: Checkpoint, sources: list[str], beam: int) -> list[list[Candidate]]:
    """Each source's beam n-best (all `beam` finished hypotheses) with their channel scores."""
    cfg = decoding(f"beam:beam_size={beam},n_best={beam}", Path(CONFIG_PATH))
    lists = Translator(forward.model, forward.tokenizer, cfg).translate_nbest(sources, progress=True)
    pairs = [(i, text, score) for i, hyps in enumerate(lists) for text, score in hyps]
    hyp_ids = reverse.tokenizer.encode_src([text for _, text, _ in pairs])
    channel = channel_scores(reverse.model, hyp_ids, reverse.tokenizer.encode_tgt([sources[i] for i, _, _ in pairs]))
    out: list[list[Candidate]] = [[] for _ in sources]
    for (i, text, score), c in zip(pairs, channel):
        out[i].append(Candidate(text, score, c))
    return out


def noisy_channel(cands: list[Candidate], weight: float) -> str:
    """The candidate of the highest score + `weight` × channel score."""
    return max(cands, key=lambda c: c.score + weight * c.channel).text


def mbr(cands: list[Candidate], temperature: float) -> str:
    """The candidate of the highest expected sentence BLEU against the others, weighted by softmax(score / T)."""
    top = max(c.score for c in cands)
    weights = [math.exp((c.score - top) / temperature) for c in cands]
    total = sum(weights)
    bleu = sacrebleu.BLEU(effective_order=True)

    def risk(h: Candidate) -> float:
        return sum(w / total * bleu.sentence_score(h.text, [c.text]).score for w, c in zip(weights, cands))

    return max(cands, key=risk).text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("forward", help="the model whose n-best is reranked: a run folder or a checkpoint file")
    parser.add_argument("reverse", help="a model of the opposite direction (the noisy channel)")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--weights", type=float, nargs="+", default=[0, 0.1, 0.2, 0.3, 0.5, 1.0])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.1, 0.3, 1.0])
    parser.add_argument("--sets", nargs="+", help="set names (default: every test set, then val)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    args = parser.parse_args()
    forward, reverse = load_checkpoint(args.forward), load_checkpoint(args.reverse)
    data = forward.config.data
    if (reverse.config.data.src_lang, reverse.config.data.tgt_lang) != (data.tgt_lang, data.src_lang):
        parser.error(f"{args.reverse} does not translate {data.tgt_lang}->{data.src_lang}")
    sets = test_sets(data, None, val=True)
    names = args.sets or list(sets)
    if unknown := [n for n in names if n not in sets]:
        parser.error(f"unknown sets {unknown}; these exist: {', '.join(sets)}")
    settings = {f"channel λ={w:g}": (noisy_channel, w) for w in args.weights}
    settings |= {f"MBR T={t:g}": (mbr, t) for t in args.temperatures}
    bleu: dict[str, dict[str, float]] = {setting: {} for setting in settings}
    for name in tqdm(names, desc="sets", unit="set"):
        pairs = list(sets[name].pairs())
        lists = nbest(forward, reverse, [s for s, _ in pairs], args.beam)
        refs = [[t for _, t in pairs]]
        for setting, (pick, value) in settings.items():
            hyps = [pick(cands, value) for cands in lists]  # an untranslated sentence: one empty candidate
            bleu[setting][name] = sacrebleu.corpus_bleu(hyps, refs).score
    val = data.val_split
    chosen = {  # each reranker's setting of the best val BLEU, where val was scored
        kind: max((s for s in bleu if s.startswith(kind)), key=lambda s: bleu[s][val])
        for kind in ("channel", "MBR")
        if val in names
    }
    print("| reranking | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for setting, row in bleu.items():
        mark = " (chosen on val)" if setting in chosen.values() else ""
        print(f"| {setting}{mark} | " + " | ".join(f"{row[n]:.2f}" for n in names) + " |")
    if args.json:
        print(json.dumps({"beam": args.beam, "bleu": bleu, "chosen": chosen}))


if __name__ == "__main__":
    main()
