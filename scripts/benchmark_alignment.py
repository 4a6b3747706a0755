"""Word alignments against the Hansards gold standard (HLT-NAACL 2003, English-French, 447 pairs, sure and possible
links): the alignment error rate (AER) of a diagonal baseline, of eflomal, and of each checkpoint's cross-attention,
layer by layer (mean over heads) and from its default head (a guided model's trained head).

eflomal (its defaults, both directions, grow-diag-final-and) is trained on the checkpoint's training corpus (its
prepared training split, decoded, lower-cased, punctuation split) plus the gold's sentences, as aligners are used.
Our models read the gold's sentences as they are (tokenized, lower-cased French and English); their links are read
by teacher forcing the English reference (`transformer.decoding.alignment`).

    python scripts/benchmark_alignment.py --checkpoint runs/plain runs/guided --fetch --eflomal --json

The `--json` last line holds `cpu`, `sentences` and `rows`: {name, aer, links}.
"""

import argparse
import json
import time
from pathlib import Path

from transformer.bench.alignment import aer, diagonal, fetch_gold, normalized, read_gold
from transformer.bench.timing import cpu_description
from transformer.core.config import AlignmentConfig
from transformer.data.preparation import prepare
from transformer.data.tokenizer import word_index
from transformer.data.word_links import eflomal_links
from transformer.decoding.alignment import Aligner, AttentionHead
from transformer.runs.loading import load


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", nargs="*", default=[], help="run folders or checkpoint files")
    parser.add_argument("--gold", default="data/hansards", help="folder of test.e, test.f, test.wa.nonullalign")
    parser.add_argument("--fetch", action="store_true", help="download the gold where it is missing")
    parser.add_argument("--eflomal", action="store_true", help="align with eflomal too (the first checkpoint's data)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON on the last line")
    return parser.parse_args()


def eflomal_row(checkpoint: str, gold) -> dict:
    """eflomal on the checkpoint's training corpus plus the gold's sentences."""
    loaded = load(checkpoint, device="cpu")
    prepared = prepare(loaded.config.data, loaded.tokenizer)
    train, tokenizer = prepared.split(prepared.meta["train"]), prepared.tokenizer
    src = [normalized(tokenizer.src.decode(ids)) for ids in train["src_ids"]]
    tgt = [normalized(text) for text in tokenizer.decode_tgt(train["tgt_ids"])]
    start = time.perf_counter()
    found = eflomal_links(src + gold.french, tgt + gold.english)[-len(gold.french) :]
    seconds = time.perf_counter() - start
    return {"name": f"eflomal ({len(src):,} training pairs + the gold's, {seconds:.0f} s)", "aer": aer(found, gold)}


def model_rows(checkpoint: str, gold) -> list[dict]:
    """The AER of each decoder layer's cross-attention (mean over heads) and of the default head."""
    loaded = load(checkpoint, device="cpu")
    tokenizer, rows = loaded.tokenizer, []
    src_ids, tgt_ids = tokenizer.encode_src(gold.french), tokenizer.encode_tgt(gold.english)
    pieces = tokenizer.piece_table("src"), tokenizer.piece_table("tgt")
    mismatched = sum(
        max(word_index([pieces[0][i] for i in s]), default=-1) + 1 != len(f.split())
        for s, f in zip(src_ids, gold.french)
    )
    default = loaded.aligner(AlignmentConfig())
    layers = default.model.cross_attention_layers
    heads = [AttentionHead(layer, None) for layer in range(layers)]
    chosen = AttentionHead(default.head.layer % layers, default.head.head)
    for head in heads if chosen in heads else [*heads, chosen]:
        aligner = Aligner(default.model, default.src_pieces, default.tgt_pieces, head)
        found = [set(links) for links in aligner.links(src_ids, tgt_ids)]
        rows.append({"name": f"{Path(checkpoint).name}: {head.describe()}", "aer": aer(found, gold)})
    rows[-1]["mismatched_sentences"] = mismatched
    return rows


def main() -> None:
    args = arguments()
    folder = Path(args.gold)
    if args.fetch:
        fetch_gold(folder)
    gold = read_gold(folder)
    rows = [{"name": "diagonal", "aer": aer(diagonal(gold), gold)}]
    if args.eflomal and args.checkpoint:
        rows.append(eflomal_row(args.checkpoint[0], gold))
    for checkpoint in args.checkpoint:
        rows += model_rows(checkpoint, gold)
    print(f"Hansards gold, {len(gold.french)} sentences; {cpu_description()}")
    print("| aligner | AER |\n|---|---|")
    for row in rows:
        print(f"| {row['name']} | {100 * row['aer']:.1f}% |")
    if args.json:
        print(json.dumps({"cpu": cpu_description(), "sentences": len(gold.french), "rows": rows}))


if __name__ == "__main__":
    main()
