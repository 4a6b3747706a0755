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

import sacrebleu
from tqdm import tqdm

from transformer.bench.rerank import Candidate, channel_scores, mbr, noisy_channel
from transformer.checkpoint import Checkpoint, load_checkpoint
from transformer.results import decoding, test_sets
from transformer.translator import Translator


def nbest(forward: Checkpoint, reverse: Checkpoint, sources: list[str], beam: int) -> list[list[Candidate]]:
    """Each source's beam n-best (all `beam` finished hypotheses) with their channel scores."""
    cfg = decoding(f"beam:beam_size={beam},n_best={beam}")
    lists = Translator(forward.model, forward.tokenizer, cfg).translate_nbest(sources, progress=True)
    pairs = [(i, text, score) for i, hyps in enumerate(lists) for text, score in hyps]
    hyp_ids = reverse.tokenizer.encode_src([text for _, text, _ in pairs])
    channel = channel_scores(reverse.model, hyp_ids, reverse.tokenizer.encode_tgt([sources[i] for i, _, _ in pairs]))
    out: list[list[Candidate]] = [[] for _ in sources]
    for (i, text, score), c in zip(pairs, channel):
        out[i].append(Candidate(text, score, c))
    return out


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
