"""Decoding speed: ours in each precision against CTranslate2 in every compute type this CPU runs.

Synthetic mode (the default): for each size (`small`, `base`), search (greedy, beam 5) and batch (32: throughput; 1:
latency, the sentences decoded one at a time), every engine decodes the same random source sentences with EOS
disabled, so each sentence decodes exactly `--out-len` tokens. Our model has random weights;
CTranslate2 runs them exported with `transformer.export.ctranslate2` (`pip install -e .[export]`);
Hugging Face's MarianMT of the same size, with weights of its own, is timed too when `transformers` is
installed (`pip install -e .[bench]`). Ours runs as a `Translator` runs it: through its
inference copy (transformer/fast_inference/) in each precision, made once.

Real mode (`--checkpoint` and `--sentences`): what users run. Each checkpoint (a run folder or a file; the table's
size is its `configs/model` preset, else its width and depth) translates the sentences with EOS on, each sentence up
to the decoding preset's limit a·(source pieces + 1) + b. Ours as `transformer-translate` calls it
(`load(checkpoint).translator(<the greedy or beam preset>).translate(sentences)`) in its default precision (`auto`,
shown with what it resolved to), fp32, int8 and bf16 where the CPU computes bf16 natively; CTranslate2 on the
checkpoint's `transformer-export` folder, called as its README shows (`engines.ctranslate2_translate`; its beam
patience, `--ct2-patience`, defaults to the README's). Batch 32 is the whole file
through each engine's own batching; batch 1 the first `--latency-sentences` sentences, one call each. With
`--references`, each engine's BLEU (sacreBLEU's corpus BLEU, as `transformer-evaluate` prints it) of its batch-32
output.

Both modes time CTranslate2 in every plain compute type the CPU supports (float32, int8, int16, bfloat16: those of
`ctranslate2.get_supported_compute_types("cpu")`), report sentences/s and target tokens/s (pieces generated, EOS
excluded; synthetic: `--out-len` a sentence), and compare ours in its default precision with CTranslate2's fastest
compute type. Each engine runs in a process of its own, with the same number of threads: a process that has run
CTranslate2 runs torch up to 1.8× slower. Calls are interleaved round by round after one warm-up each; the table
gives medians. The `--json` last line holds `cpu`, `default_precision`, `records` (one per engine and cell:
engine, precision (ours' name, or CTranslate2's compute type), size, strategy, batch, sent_per_s, tok_per_s, and
in the real mode with references bleu, of the record's own translations: the whole file, or at batch 1 the first
sentences) and `ct2_best`, a dict keyed "size,strategy,batch" of {"compute_type", "sent_per_s"}: CTranslate2's
fastest compute type in that cell.

    python scripts/benchmark_decoding.py                          # small and base, every precision
    python scripts/benchmark_decoding.py --size small --json      # ... and a JSON last line
    python scripts/benchmark_decoding.py --quick --precisions fp32  # a tiny run (the tests')
    python scripts/benchmark_decoding.py --size base --device cuda --precisions fp32 bf16
    python scripts/benchmark_decoding.py --checkpoint outputs/small outputs/base \\
        --sentences data/multi30k/test_2016_flickr.fr.gz --references data/multi30k/test_2016_flickr.en.gz --json

`--uncached` and `--unpacked` add our fp32 search without the KV cache and with oneDNN off (`F.linear`), `--eager`
(GPU) without CUDA graphs (synthetic mode); `--compiled` adds ours in each precision but bf16 with its decoder step
compiled ahead of time (`decoding.compiled=true`; packages are built before the timing, once per model and
precision, and kept in the cache folder; records with "variant": "compiled");
`--products` instead times the decoder's matrix products alone, in GFLOP/s, through F.linear and through the
kernel of each inference precision (`decoding.precision`: fp32, bf16 where the CPU has bf16 products, int8).
"""

import argparse
import functools
import importlib.util
import json
import tempfile
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import sacrebleu
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from transformer.bench.engines import (
    DTYPES,
    Case,
    Decoded,
    EngineError,
    Engines,
    Pieces,
    RealSetup,
    Setup,
    Trained,
    ct2_compute_types,
    ours,
)
from transformer.bench.marian_reference import SIZES, model_config
from transformer.bench.timing import ISA, add_workload_arguments, cpu_description, measure
from transformer.cli.export import check_exportable
from transformer.compute.auto import resolve
from transformer.compute.hardware import native_bf16
from transformer.core import presets
from transformer.core.config import InferencePrecision, ModelConfig, choices
from transformer.core.errors import UserError
from transformer.core.precision import AUTO, TRANSLATED_IN
from transformer.data.sources.streams import read_lines
from transformer.fast_inference import inference_copy
from transformer.fast_inference.kernels import cpu_isa, runs
from transformer.runs.loading import load

PRECISIONS = ("fp32", "bf16", "int8")
QUICK = dict(size=["small"], batch=[4, 1], src_len=6, out_len=4, vocab=64, rounds=1, latency_sentences=2)


def default_precision(device: str = "cpu") -> str:
    """The precision translate and serve run in by default on `device`: `precision.TRANSLATED_IN`, resolved on this
    CPU; fp32 on a GPU (bf16 and int8 are CPU inference kernels)."""
    if device != "cpu":
        return "fp32"
    return resolve(TRANSLATED_IN, "inference", "cpu")


def product_gflops(rows: int, k: int, n: int, rounds: int, calls: int = 50) -> dict[str, float]:
    """GFLOP/s of one (rows × k)·(k × n) product through F.linear and through an inference copy's kernel in each
    precision that runs natively here (a precision that would fall back to fp32 is left out)."""
    layer, x = torch.nn.Linear(k, n), torch.randn(rows, k)
    products = {"F.linear": lambda: F.linear(x, layer.weight, layer.bias)}
    for precision in choices(InferencePrecision):
        if runs(precision) == precision:
            copy = inference_copy(torch.nn.Sequential(layer), precision)
            products[precision] = functools.partial(copy, x)

    def repeated(product: Callable[[], object]) -> Callable[[], object]:
        return lambda: [product() for _ in range(calls)]

    with torch.inference_mode():
        seconds = measure({name: repeated(product) for name, product in products.items()}, rounds, x.device)
    return {name: 2 * rows * k * n * calls / sec / 1e9 for name, sec in seconds.items()}


def products(args: argparse.Namespace) -> None:
    """The decoder's products (rows: the greedy batch, then beam 5's) through F.linear and each precision's kernel."""
    cfg = model_config(args.size)
    d, ff = cfg.d_model, cfg.d_ff
    shapes = {"qkv": (d, 3 * d), "attention out": (d, d), "ff in": (d, ff), "ff out": (ff, d), "vocab": (d, args.vocab)}
    names = ["F.linear", *(p for p in choices(InferencePrecision) if runs(p) == p)]
    where = f"{cpu_isa()}, {torch.get_num_threads()} threads"
    print(f"{args.size}, {where}, GFLOP/s, median of {args.rounds} rounds of 50 calls")
    print(f"{'rows':>5} {'product':14} " + " ".join(f"{name:>9}" for name in names) + "  over fp32")
    for rows in (args.batch, 5 * args.batch):
        for name, (k, n) in shapes.items():
            gflops = product_gflops(rows, k, n, args.rounds)
            ratios = " ".join(f"{p} {gflops[p] / gflops['fp32']:.2f}x" for p in names if p not in ("F.linear", "fp32"))
            print(f"{rows:5} {name:14} " + " ".join(f"{gflops[p]:9.0f}" for p in names) + f"  {ratios}")


def plan(sizes: list[str], batches: list[int], rows: list[tuple[str, str]], variants: list[str]) -> list[Case]:
    """Every case, cell by cell (size, strategy, batch), each cell's engines (`rows`: engine, precision) one after
    the other, then our fp32 search's `variants` (`compiled`: ours compiled in each of its precisions)."""
    cases = []
    compiled = [Case("ours", p, "", "", 0, "compiled") for engine, p in rows if engine == "ours" and p != "bf16"]
    for size in sizes:
        for strategy in ("greedy", "beam"):
            for batch in batches:
                cases += [Case(engine, p, size, strategy, batch) for engine, p in rows]
                cases += [Case("ours", "fp32", size, strategy, batch, v) for v in variants if v != "compiled"]
                if "compiled" in variants:
                    cases += [c._replace(size=size, strategy=strategy, batch=batch) for c in compiled]
    return cases


def engine_rows(args: argparse.Namespace, engines: set[str]) -> list[tuple[str, str]]:
    """(engine, precision) of every engine timed in each cell: ours in each precision (real mode: first the default,
    auto, and bf16 only where the CPU computes it natively), CTranslate2 in each compute type, MarianMT."""
    if args.checkpoint:
        ours = [AUTO, *(p for p in args.precisions if p != "bf16" or native_bf16("cpu"))]
    else:
        ours = args.precisions
    ct2 = [("ctranslate2", t) for t in (ct2_compute_types() if "ctranslate2" in engines else [])]
    hf = [("marianmt", p) for p in (args.precisions if args.device != "cpu" else ["fp32"]) if p in DTYPES]
    return [*(("ours", p) for p in ours), *ct2, *(hf if "marianmt" in engines else [])]


def prepare(args: argparse.Namespace, folder: Path, ct2: bool) -> Setup:
    """Our weights for each size (and their CTranslate2 export) in `folder`, and the random sentences."""
    torch.manual_seed(0)
    for size in args.size:
        model = ours(size, args.vocab)
        torch.save(model.state_dict(), folder / f"{size}.pt")
        if ct2:
            from transformer.export.ctranslate2 import CheckpointConverter

            vocab = Pieces(args.vocab)
            config = OmegaConf.create({"model": asdict(model.config)})
            ckpt = SimpleNamespace(model=model, config=config, tokenizer=SimpleNamespace(src=vocab, tgt=vocab))
            CheckpointConverter(ckpt).convert(str(folder / f"ct2_{size}"), force=True)
    sentences = max(*args.batch, args.latency_sentences)
    src = torch.randint(3, args.vocab, (sentences, args.src_len)).tolist()
    threads = args.threads or torch.get_num_threads()
    return Setup(
        str(folder), tuple(map(tuple, src)), args.vocab, args.out_len, args.latency_sentences, threads, args.device
    )


def model_label(model_cfg) -> str:
    """A checkpoint's size in the table: the `configs/model` preset its dimensions match, else its width and depth."""
    dims = ("family", "d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff")
    for name in presets.names("model"):
        preset = presets.compose("model", name)
        if all(getattr(preset, key) == model_cfg.get(key, getattr(ModelConfig, key)) for key in dims):
            return name
    return f"d{model_cfg.d_model} {model_cfg.n_encoder_layers}+{model_cfg.n_decoder_layers} layers"


def trained(checkpoint: str, export: Path | None) -> Trained:
    """`checkpoint` loaded as `transformer-translate` loads it, exported for CTranslate2 to `export` (unless None)."""
    ckpt = load(checkpoint, device="cpu").members[0]
    if export is not None:
        from transformer.export.ctranslate2 import export_ctranslate2

        check_exportable(ckpt.config.model)
        export.mkdir()
        export_ctranslate2(ckpt, export, export.name)
    return Trained(model_label(ckpt.config.model), str(ckpt.path), str(export or ""), ckpt.model.max_positions)


def prepare_real(args: argparse.Namespace, folder: Path, ct2: bool) -> RealSetup:
    """Each checkpoint (exported into `folder` for CTranslate2) and the sentences to translate."""
    models = [trained(c, folder / f"ct2_{i}" if ct2 else None) for i, c in enumerate(args.checkpoint)]
    if len({model.label for model in models}) < len(models):  # two of one size: named by what the user gave
        models = [replace(model, label=checkpoint) for model, checkpoint in zip(models, args.checkpoint)]
    src = tuple(read_lines(Path(args.sentences)))
    threads = args.threads or torch.get_num_threads()
    return RealSetup(tuple(models), src, args.latency_sentences, threads, ct2_patience=args.ct2_patience)


def timed(setup: Setup | RealSetup, cases: list[Case], rounds: int):
    """Each case's median seconds a call, and in the real mode its translations (`Decoded`)."""
    with Engines(setup) as processes:  # each waits for its own device: time as on the CPU
        seconds = measure({case: functools.partial(processes.run, case) for case in cases}, rounds, torch.device("cpu"))
        outputs = {case: processes.output(case) for case in cases} if isinstance(setup, RealSetup) else {}
    return seconds, outputs


def label(case: Case) -> str:
    precision = f"{AUTO}={default_precision()}" if case.precision == AUTO else case.precision
    return " ".join(filter(None, [case.engine, precision, case.variant and f"({case.variant})"]))


def measured(seconds: dict[Case, float], outputs: dict[Case, Decoded], setup, refs: list[str]) -> dict[Case, dict]:
    """Each case's sentences/s, target tokens/s (synthetic: `out_len` a sentence) and, with references, BLEU of its
    translations (sacreBLEU's corpus BLEU, as `transformer-evaluate` prints it)."""
    rows = {}
    for case, sec in seconds.items():
        n = setup.sentences(case.batch)
        pieces = outputs[case].pieces if case in outputs else n * setup.out_len
        rows[case] = {"sent_per_s": n / sec, "tok_per_s": pieces / sec}
        if refs and case in outputs:
            rows[case]["bleu"] = sacrebleu.corpus_bleu(outputs[case].texts, [refs[:n]]).score
    return rows


def ct2_best(rows: dict[Case, dict]) -> dict[str, dict]:
    """CTranslate2's fastest compute type in each cell, keyed "size,strategy,batch"."""
    best: dict[str, dict] = {}
    for case, row in rows.items():
        key = f"{case.size},{case.strategy},{case.batch}"
        if case.engine == "ctranslate2" and row["sent_per_s"] > best.get(key, {}).get("sent_per_s", 0):
            best[key] = {"compute_type": case.precision, "sent_per_s": row["sent_per_s"]}
    return best


def cell_value(case: Case, row: dict) -> str:
    """Sentences/s and target tokens/s; at batch 1 also milliseconds per sentence."""
    value = f"{row['sent_per_s']:.1f}/{row['tok_per_s']:.0f}"
    return value + (f" ({1000 / row['sent_per_s']:.0f} ms)" if case.batch == 1 else "")


def ratio(here: dict[str, Case], rows: dict[Case, dict], default: str) -> str:
    """Ours in its default precision over CTranslate2's fastest compute type, in one cell."""
    ct2 = [case for case in here.values() if case.engine == "ctranslate2" and not case.variant]
    ours_case = here.get(f"ours {default}")
    if not ct2 or ours_case is None:
        return ""
    best = max(ct2, key=lambda case: rows[case]["sent_per_s"])
    return f"{rows[ours_case]['sent_per_s'] / rows[best]['sent_per_s']:.2f}x ({best.precision})"


def print_table(rows: dict[Case, dict], default: str) -> None:
    """A row per cell (size, search, batch), a column per engine, and the ratio of ours to CTranslate2's best."""
    columns = list(dict.fromkeys(label(case) for case in rows))
    widths = [max(16, len(c)) for c in columns]
    cells = list(dict.fromkeys((case.size, case.strategy, case.batch) for case in rows))
    first = max(len("size, search, batch"), *(len(", ".join(map(str, cell))) for cell in cells))
    head = [f"{'size, search, batch':{first}}", *(f"{c:>{w}}" for c, w in zip(columns, widths))]
    print(" | ".join([*head, f"ours {default} / ctranslate2 fastest"]))
    for cell in cells:
        here = {label(case): case for case in rows if (case.size, case.strategy, case.batch) == cell}
        values = [cell_value(here[c], rows[here[c]]) if c in here else "" for c in columns]
        line = [f"{', '.join(map(str, cell)):{first}}", *(f"{v:>{w}}" for v, w in zip(values, widths))]
        print(" | ".join([*line, ratio(here, rows, default)]))


def print_bleu(rows: dict[Case, dict]) -> None:
    """BLEU of each engine's whole-file translations, a row per size and search."""
    whole = {case: row for case, row in rows.items() if case.batch > 1 and "bleu" in row}
    if not whole:
        return
    columns = list(dict.fromkeys(label(case) for case in whole))
    cells = list(dict.fromkeys((case.size, case.strategy) for case in whole))
    first = max(len("BLEU, whole file"), *(len(", ".join(cell)) for cell in cells))
    print(" | ".join([f"{'BLEU, whole file':{first}}", *columns]))
    for cell in cells:
        here = {label(case): row["bleu"] for case, row in whole.items() if (case.size, case.strategy) == cell}
        print(
            " | ".join(
                [f"{', '.join(cell):{first}}", *(f"{here[c]:>{len(c)}.2f}" if c in here else "" for c in columns)]
            )
        )


def workload(setup: Setup | RealSetup, args: argparse.Namespace) -> str:
    """What was translated, in one line."""
    rounds = f"median of {args.rounds} rounds; batch 1: the first {setup.latency_sentences} sentences one by one"
    if isinstance(setup, RealSetup):
        names = [m.path if m.label == m.path else f"{m.label}: {m.path}" for m in setup.models]
        beam = presets.compose("decoding", "beam")
        limit = f"up to {beam.max_len_a:g}·(pieces + 1) + {beam.max_len_b}"
        patience = "the export README's" if setup.ct2_patience is None else f"{setup.ct2_patience:g}"
        searches = f"{limit}, CTranslate2's beam patience {patience}"
        return f"{len(setup.src)} sentences of {args.sentences}, EOS on ({'; '.join(names)}; {searches}); {rounds}"
    tokens = f"source {args.src_len} tokens, output {setup.out_len} tokens (EOS disabled)"
    return f"{tokens}, vocabulary {setup.vocab}; {rounds}"


def report(rows: dict[Case, dict], setup: Setup | RealSetup, args: argparse.Namespace) -> dict:
    """Print the tables and return the JSON object."""
    name, isa = cpu_description()
    default = default_precision(str(setup.device))
    print(
        f"CPU: {name}; {', '.join(isa) or 'none of ' + '/'.join(ISA)}; torch kernels: "
        f"{torch.backends.cpu.get_cpu_capability()}; {setup.threads} threads; device {setup.device}"
    )
    print(workload(setup, args) + "; each cell: sentences/s/target tokens/s")
    print_table(rows, f"{AUTO}={default}" if isinstance(setup, RealSetup) else default)
    print_bleu(rows)
    keys = ("engine", "precision", "size", "strategy", "batch")
    records = [
        {**{k: getattr(case, k) for k in keys}, **{k: round(v, 2) for k, v in row.items()}}
        | ({"variant": case.variant} if case.variant else {})
        for case, row in rows.items()
        if case.variant in ("", "compiled")
    ]
    best = {cell: {**v, "sent_per_s": round(v["sent_per_s"], 2)} for cell, v in ct2_best(rows).items()}
    return {"cpu": name, "records": records, "default_precision": default, "ct2_best": best}


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", nargs="+", choices=SIZES, default=list(SIZES))
    parser.add_argument("--batch", nargs="+", type=int, default=[32, 1], help="sentences per call; 1: latency")
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS), help="ours")
    parser.add_argument("--checkpoint", nargs="+", help="real mode: run folders or checkpoint files")
    parser.add_argument("--sentences", help="real mode: the source sentences, one a line (plain or .gz)")
    parser.add_argument("--references", help="real mode: their references, for BLEU")
    parser.add_argument(
        "--ct2-patience", type=float, help="real mode: CTranslate2's beam patience (default: its export README's)"
    )
    add_workload_arguments(parser)
    parser.add_argument("--threads", type=int, default=0, help="threads of every engine; 0 = torch's default")
    parser.add_argument("--uncached", action="store_true", help="also time our fp32 search without the KV cache")
    parser.add_argument("--unpacked", action="store_true", help="also time our fp32 search with oneDNN off (F.linear)")
    parser.add_argument("--eager", action="store_true", help="also time our fp32 search without CUDA graphs (GPU)")
    parser.add_argument(
        "--compiled", action="store_true", help="also time ours with its decoder step compiled (decoding.compiled)"
    )
    parser.add_argument("--no-marian", action="store_true", help="leave out MarianMT")
    parser.add_argument(
        "--quick", action="store_true", help="a tiny run: " + ", ".join(f"{k}={v}" for k, v in QUICK.items())
    )
    parser.add_argument("--products", action="store_true", help="time the decoder's matrix products alone")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (CTranslate2 and int8: CPU only)")
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    return parser


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """Refuse settings that do not go together; the references' lines (real mode with --references, else [])."""
    if args.device != "cpu" and "int8" in args.precisions:
        parser.error("int8 runs on the CPU only; choose --precisions fp32 bf16 with --device cuda")
    if bool(args.checkpoint) != bool(args.sentences) or (args.references and not args.sentences):
        parser.error("the real mode takes --checkpoint and --sentences together (and --references only with them)")
    if args.checkpoint and (args.device != "cpu" or args.products or args.uncached or args.unpacked or args.eager):
        parser.error("the real mode runs on the CPU, without --products, --uncached, --unpacked or --eager")
    if not args.references:
        return []
    refs, sources = list(read_lines(Path(args.references))), sum(1 for _ in read_lines(Path(args.sentences)))
    if len(refs) != sources:
        parser.error(f"--references has {len(refs)} lines, --sentences {sources}: give a reference per sentence")
    return refs


def engines_here(args: argparse.Namespace) -> set[str]:
    """The engines to time: ours, CTranslate2 on a CPU where it is installed, MarianMT (synthetic mode) likewise."""
    engines = {"ours"}
    if args.device == "cpu" and importlib.util.find_spec("ctranslate2"):
        engines.add("ctranslate2")
    if not args.checkpoint and not args.no_marian and importlib.util.find_spec("transformers"):
        engines.add("marianmt")
    return engines


def benchmark(args: argparse.Namespace, refs: list[str]) -> dict:
    """Time every case, print the tables and return the JSON object."""
    wanted = (
        ("no cache", args.uncached),
        ("unpacked", args.unpacked),
        ("eager", args.eager),
        ("compiled", args.compiled),
    )
    engines = engines_here(args)
    with tempfile.TemporaryDirectory(prefix="bench_decoding_") as folder:
        if args.checkpoint:
            setup = prepare_real(args, Path(folder), "ctranslate2" in engines)
            sizes = [model.label for model in setup.models]
        else:
            setup, sizes = prepare(args, Path(folder), "ctranslate2" in engines), args.size
        cases = plan(sizes, args.batch, engine_rows(args, engines), [v for v, on in wanted if on])
        seconds, outputs = timed(setup, cases, args.rounds)
    return report(measured(seconds, outputs, setup, refs), setup, args)


def main() -> None:
    parser = arguments()
    args = parser.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    try:
        refs = check(parser, args)
        if args.threads:
            torch.set_num_threads(args.threads)
        if args.products:
            return products(argparse.Namespace(**{**vars(args), "size": args.size[0], "batch": args.batch[0]}))
        result = benchmark(args, refs)
    except (EngineError, UserError) as failure:
        parser.exit(2, f"error: {failure}\n")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
