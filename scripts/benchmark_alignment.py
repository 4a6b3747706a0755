"""Word alignments against the Hansards gold standard (HLT-NAACL 2003, English-French, 447 pairs, sure and possible
links): the alignment error rate (AER) of a diagonal baseline, of eflomal, and of each checkpoint's cross-attention,
layer by layer (mean over heads) and from its default head (a guided model's trained head).

eflomal (its defaults, both directions, grow-diag-final-and) is trained on the checkpoint's training corpus (its
prepared training split, decoded, lower-cased, punctuation split) plus the gold's sentences, as aligners are used.
Our models read the gold's sentences as they are (tokenized, lower-cased French and English); their links are read
by teacher forcing the English reference (`transformer.decoding.alignment`).

    python scripts/benchmark_alignment.py --checkpoint runs/plain runs/guided --fetch --eflomal --domain 500 --json

The `--json` last line holds `cpu`, `sentences` and `rows`: {name, aer, links}.
"""

import argparse
import json
import time
from pathlib import Path

import sacrebleu
from omegaconf import OmegaConf

from transformer.bench.alignment import aer, diagonal, fetch_gold, normalized, read_gold
from transformer.bench.timing import cpu_description
from transformer.core.config import AlignmentConfig, DataConfig, DecodingConfig
from transformer.data.guided_links import prepare_links, read_links
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
    parser.add_argument(
        "--domain",
        type=int,
        default=0,
        help="also each model's greedy BLEU on the gold (lower-cased), and on N training pairs how often its default "
        "head's piece links agree with the eflomal links it was (or would be) trained on: the domain gap",
    )
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


def domain_row(checkpoint: str, gold, pairs: int) -> dict:
    """Greedy BLEU on the gold, and the default head's agreement with the training split's eflomal links."""
    loaded = load(checkpoint, device="cpu")
    translator = loaded.translator(DecodingConfig(strategy="greedy", precision="fp32"))
    bleu = sacrebleu.corpus_bleu(translator.translate(gold.french), [gold.english], lowercase=True).score
    prepared = prepare(loaded.config.data, loaded.tokenizer)
    train = prepared.split(prepared.meta["train"])
    chunk = OmegaConf.select(loaded.config, "data.word_alignment_chunk", default=DataConfig().word_alignment_chunk)
    links = read_links(prepare_links(prepared, "eflomal", chunk), len(train))
    rows = list(range(0, len(train), max(1, len(train) // pairs)))[:pairs]
    found = loaded.aligner(AlignmentConfig()).links(
        *(list(train[rows][k]) for k in ("src_ids", "tgt_ids")), pieces=True
    )
    hits = total = 0
    for row, predicted in zip(rows, found):
        flat, taught = links[row].as_py(), {}
        for t, s in zip(flat[0::2], flat[1::2]):
            taught.setdefault(t, set()).add(s)
        hits += sum(s in taught[t] for t, s in predicted if t in taught)
        total += sum(t in taught for t, _ in predicted)
    name = f"{Path(checkpoint).name}: greedy BLEU on the gold, agreement with eflomal on {len(rows)} training pairs"
    return {"name": name, "bleu": round(bleu, 2), "agreement": round(hits / max(total, 1), 4)}


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
    domain = [domain_row(checkpoint, gold, args.domain) for checkpoint in args.checkpoint] if args.domain else []
    print(f"Hansards gold, {len(gold.french)} sentences; {cpu_description()}")
    print("| aligner | AER |\n|---|---|")
    for row in rows:
        print(f"| {row['name']} | {100 * row['aer']:.1f}% |")
    for row in domain:
        print(f"{row['name']}: BLEU {row['bleu']:.1f}, agreement {100 * row['agreement']:.1f}%")
    rows += domain
    if args.json:
        print(json.dumps({"cpu": cpu_description(), "sentences": len(gold.french), "rows": rows}))


if __name__ == "__main__":
    main()
