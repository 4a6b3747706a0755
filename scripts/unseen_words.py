"""How much of each test set's vocabulary the training corpora cover, and BLEU on the sentences they do not.

For each test set: its words (lowercased, \\w+) that never occur in the training corpus, on the source side and on
the reference side, first against the parallel corpus, then against it plus the synthetic pairs of a
back-translation; the share of sentences with a source word never seen; and for each hypotheses file given, sacreBLEU
on the sentences whose source words were all seen and on the others. Back-translation adds new target words (its
English is real) but hardly any source words (its French comes from a model trained on the parallel corpus): this
table shows how much of a test set that leaves out.

    python scripts/unseen_words.py --corpus ../shared/data/multi30k --synthetic outputs/train_bt/synthetic \\
        --hyps base=outputs/fren/checkpoints/best.{split}.beam5.hyp \\
               bt=outputs/train_bt/final/checkpoints/best.{split}.beam5.hyp
"""

import argparse
import re
from collections import Counter
from pathlib import Path

import sacrebleu

from transformer.corpus import read_lines
from transformer.errors import UserError

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


def split_bleu(hyps: list[str], refs: list[str], unseen: list[bool]) -> str:
    """sacreBLEU on the sentences with every source word seen / on those with one unseen ("-" for none)."""
    if len(hyps) != len(refs):
        raise SystemExit(f"{len(hyps)} hypotheses for {len(refs)} references: give the hypotheses of this test set")
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
    train = {lang: vocabulary(args.corpus / f"train.{lang}.gz") for lang in (src, tgt)}
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
        lines = {lang: list(read_lines(args.corpus / f"{split}.{lang}.gz")) for lang in (src, tgt)}
        unseen = [any(w not in train[src] for w in words(line)) for line in lines[src]]
        cells = [split, str(len(unseen)), f"{sum(len(words(s)) for s in lines[src]) / len(unseen):.1f}"]
        for lang in (src, tgt):
            extra = f" ({unseen_share(lines[lang], both[lang]):.2f})" if both else ""
            cells.append(f"{unseen_share(lines[lang], train[lang]):.2f}{extra}")
        cells.append(f"{100 * sum(unseen) / len(unseen):.1f}")
        for pattern in hyps.values():
            cells.append(split_bleu(list(read_lines(Path(pattern.format(split=split)))), lines[tgt], unseen))
        rows.append("| " + " | ".join(cells) + " |")
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
    try:
        print("\n".join(table(parser.parse_args())))
    except UserError as err:  # a missing or unreadable file: one line, no traceback
        raise SystemExit(f"error: {err}") from None


if __name__ == "__main__":
    main()
