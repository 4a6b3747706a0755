"""How much of each test set's vocabulary the training corpora cover, and BLEU on the sentences they do not.

For each test set: its words (lowercased, \\w+) that never occur in the training corpus, on the source side and on
the reference side, first against the parallel corpus, then against it plus the synthetic pairs of a
back-translation; the share of sentences with a source word never seen; and for each hypotheses file given, sacreBLEU
on the sentences whose source words were all seen and on the others. Back-translation adds new target words (its
English is real) but hardly any source words (its French comes from a model trained on the parallel corpus): this
table shows how much of a test set that leaves out. With `--lengths`, a second table splits each test set by source
length instead (whitespace-separated words, as `wc -w` counts): each hypotheses file's BLEU and length ratio per
bucket, and the gain of each over the first.

    python scripts/unseen_words.py --corpus ../shared/data/multi30k --synthetic outputs/train_bt/synthetic \\
        --hyps base=outputs/fren/checkpoints/best.{split}.beam5.hyp \\
               bt=outputs/train_bt/final/checkpoints/best.{split}.beam5.hyp --lengths 10 14 18
"""

import argparse
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import sacrebleu

from transformer.corpus import builtin_files
from transformer.errors import UserError
from transformer.sources import read_lines

WORD = re.compile(r"\w+")
SPLITS = ["val", "test_2016_flickr", "test_2017_flickr", "test_2018_flickr"]


def words(line: str) -> list[str]:
    return WORD.findall(line.lower())


def vocabulary(*paths: Path) -> set[str]:
    """Every word of the given text files (plain or .gz)."""
    return {word for path in paths for line in read_lines(path) for word in words(line)}


def unseen_share(lines: list[str], known: set[str]) -> float:
    """Percent of the running words of `lines` that are not in `known`."""
    counts = Counter(word in known for line in lines for word in words(line))
    return 100 * counts[False] / max(1, sum(counts.values()))


def hypotheses(pattern: str, split: str, refs: list[str]) -> list[str]:
    """The hypotheses of `split` (PATTERN with {split}), one per reference."""
    hyps = list(read_lines(Path(pattern.format(split=split))))
    if len(hyps) != len(refs):
        raise SystemExit(f"{len(hyps)} hypotheses for {len(refs)} references: give the hypotheses of this test set")
    return hyps


def split_lines(args: argparse.Namespace, split: str) -> dict[str, list[str]]:
    """The source and target lines of `split` in --corpus, by language."""
    src, tgt = builtin_files(args.corpus, split, args.src, args.tgt)
    return {args.src: list(read_lines(src)), args.tgt: list(read_lines(tgt))}


def split_bleu(hyps: list[str], refs: list[str], unseen: list[bool]) -> str:
    """sacreBLEU on the sentences with every source word seen / on those with one unseen ("-" for none)."""
    cells = []
    for flag in (False, True):
        group = [(hyp, ref) for hyp, ref, has_unseen in zip(hyps, refs, unseen) if has_unseen == flag]
        bleu = sacrebleu.corpus_bleu([hyp for hyp, _ in group], [[ref for _, ref in group]]) if group else None
        cells.append(f"{bleu.score:.2f}" if bleu else "-")
    return " / ".join(cells)


def labelled(spec: str) -> tuple[str, str]:
    """LABEL=PATTERN as (label, pattern)."""
    label, sep, pattern = spec.partition("=")
    if not (label and sep and pattern):
        raise argparse.ArgumentTypeError(f"{spec!r}: give LABEL=PATTERN, e.g. bt=outputs/RUN/best.{{split}}.beam5.hyp")
    return label, pattern


def table(args: argparse.Namespace) -> list[str]:
    src, tgt = args.src, args.tgt
    train_src, train_tgt = builtin_files(args.corpus, "train", src, tgt)
    train = {src: vocabulary(train_src), tgt: vocabulary(train_tgt)}
    both = (
        {lang: train[lang] | vocabulary(args.synthetic / f"train.{lang}") for lang in (src, tgt)}
        if args.synthetic
        else None
    )
    hyps = dict(args.hyps)
    with_synthetic = " (+ synthetic)" if both else ""
    head = [
        "split",
        "sentences",
        f"{src} words/sentence",
        f"{src} unseen %{with_synthetic}",
        f"{tgt} unseen %{with_synthetic}",
        f"sentences with an unseen {src} word %",
    ] + [f"{label} BLEU seen / unseen" for label in hyps]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for split in args.splits:
        lines = split_lines(args, split)
        unseen = [any(w not in train[src] for w in words(line)) for line in lines[src]]
        cells = [split, str(len(unseen)), f"{sum(len(words(s)) for s in lines[src]) / len(unseen):.1f}"]
        for lang in (src, tgt):
            extra = f" ({unseen_share(lines[lang], both[lang]):.2f})" if both else ""
            cells.append(f"{unseen_share(lines[lang], train[lang]):.2f}{extra}")
        cells.append(f"{100 * sum(unseen) / len(unseen):.1f}")
        for pattern in hyps.values():
            cells.append(split_bleu(hypotheses(pattern, split, lines[tgt]), lines[tgt], unseen))
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def buckets(bounds: list[int]) -> list[tuple[int, int | None]]:
    """[lo, hi) source-length buckets from the inner bounds, e.g. [10, 14] -> (0, 10), (10, 14), (14, None)."""
    edges = [0, *sorted(bounds)]
    return list(zip(edges, [*edges[1:], None]))


def length_rows(
    split: str, lengths: list[int], refs: list[str], outputs: list[list[str]], bounds: list[int]
) -> Iterator[str]:
    """One table row per source-length bucket of `split`: sentences, each output's BLEU (length ratio), its gain."""
    for lo, hi in buckets(bounds):
        picked = [i for i, n in enumerate(lengths) if lo <= n and (hi is None or n < hi)]
        if not picked:
            continue
        scores = [sacrebleu.corpus_bleu([out[i] for i in picked], [[refs[i] for i in picked]]) for out in outputs]
        cells = [split, f"{lo}-{hi - 1}" if hi else f"{lo}+", str(len(picked))]
        cells += [f"{score.score:.2f} ({score.sys_len / score.ref_len:.3f})" for score in scores]
        cells += [f"{score.score - scores[0].score:+.2f}" for score in scores[1:]]
        yield "| " + " | ".join(cells) + " |"


def length_table(args: argparse.Namespace) -> list[str]:
    """BLEU (hypothesis/reference length ratio) of each hypotheses file per source-length bucket, and each file's
    gain over the first."""
    labels = [label for label, _ in args.hyps]
    head = ["split", f"{args.src} words", "sentences"] + [f"{label} BLEU (length ratio)" for label in labels]
    head += [f"gain {label}" for label in labels[1:]]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for split in args.splits:
        lines = split_lines(args, split)
        lengths = [len(line.split()) for line in lines[args.src]]
        refs = lines[args.tgt]
        outputs = [hypotheses(pattern, split, refs) for _, pattern in args.hyps]
        rows.extend(length_rows(split, lengths, refs, outputs, args.lengths))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus", type=Path, required=True, help="folder of SPLIT.LANG.gz files (train and the test sets)"
    )
    parser.add_argument("--synthetic", type=Path, help="folder of a back-translation's train.SRC and train.TGT")
    parser.add_argument("--src", default="fr")
    parser.add_argument("--tgt", default="en")
    parser.add_argument("--splits", nargs="+", default=SPLITS)
    parser.add_argument(
        "--hyps",
        nargs="*",
        default=[],
        type=labelled,
        metavar="LABEL=PATTERN",
        help="hypotheses files, {split} in PATTERN standing for the split's name",
    )
    parser.add_argument(
        "--lengths",
        nargs="+",
        type=int,
        metavar="N",
        help="also split BLEU by source length (whitespace-separated words) at these bounds, e.g. 10 14 18: "
        "buckets 0-9, 10-13, 14-17, 18+",
    )
    args = parser.parse_args()
    if args.lengths and not args.hyps:
        parser.error("--lengths splits the BLEU of hypotheses: give --hyps too")
    try:
        print("\n".join(table(args)))
        if args.lengths:
            print("\n" + "\n".join(length_table(args)))
    except UserError as err:  # a missing or unreadable file: one line, no traceback
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()
