"""The engines `benchmark_decoding.py` times, each in a process of its own: ours, CTranslate2 and MarianMT.

A process that has run CTranslate2 runs torch up to 1.8× slower, so no two engines share one, and no two
CTranslate2 compute types either (`process_of`). `Engines` starts them; each builds a case at its first call
(loads, packs, quantizes: the warm-up) and answers each call of it once the call is done (on a GPU, once the GPU
is). The synthetic mode (`Setup`) decodes random ids with random weights; the real mode (`RealSetup`) translates
sentences with trained checkpoints, ours as `transformer-translate` does and CTranslate2 as the export's README
shows (`ctranslate2_translate`), and hands back each case's translations (`Engines.output`)."""

import functools
import multiprocessing
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import torch

from transformer.bench.marian_reference import marian, model_config
from transformer.core import presets
from transformer.core.config import DecodingConfig
from transformer.core.special_ids import BOS_ID, PAD_ID
from transformer.decoding import beam_search, greedy_decode
from transformer.fast_inference import decoded_in, inference_copy
from transformer.fast_inference.compiled import compiled_step
from transformer.models.transformer import Transformer

BEAM = 5
PLAIN_COMPUTE_TYPES = ("float32", "bfloat16", "float16", "int16", "int8")  # CTranslate2's, not mixed (int8_float32)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def ours(size: str, vocab: int) -> Transformer:
    """Our model as `model=<size>` trains it (configs/model/<size>.yaml)."""
    return Transformer(vocab, vocab, model_config(size), joint_vocab=True).eval()


class Case(NamedTuple):
    """One timed call: an engine in a precision on one cell; `variant` names an ablation of ours."""

    engine: str  # ours | ctranslate2 | marianmt
    precision: str
    size: str
    strategy: str  # greedy | beam
    batch: int
    variant: str = ""  # "", "no cache", "unpacked", "eager" (no CUDA graphs) or "compiled" (decoding.compiled)


@dataclass(frozen=True)
class Setup:
    """What every engine's process needs: the weights' folder, the sentences and the settings."""

    folder: str  # <size>.pt: our weights; ct2_<size>/: their CTranslate2 export
    src: tuple[tuple[int, ...], ...]  # (sentences, source length), random ids without EOS
    vocab: int
    out_len: int
    latency_sentences: int  # decoded one at a time in a batch-1 call
    threads: int
    device: str

    def batches(self, batch: int) -> list[tuple[tuple[int, ...], ...]]:
        """The sentences of one call: the first `batch` together, or for batch 1 the first few one by one."""
        if batch > 1:
            return [self.src[:batch]]
        return [(row,) for row in self.src[: self.latency_sentences]]

    def sentences(self, batch: int) -> int:
        return batch if batch > 1 else self.latency_sentences


@dataclass(frozen=True)
class Trained:
    """A checkpoint of the real mode: its label (the table's size), file, CTranslate2 export and output limit."""

    label: str
    path: str  # the checkpoint file `transformer.runs.loading.load` found
    export: str  # its `transformer-export format=ctranslate2` folder ("": CTranslate2 is not installed)
    max_positions: int


@dataclass(frozen=True)
class RealSetup:
    """What every engine's process needs in the real mode: the checkpoints and the source sentences."""

    models: tuple[Trained, ...]
    src: tuple[str, ...]
    latency_sentences: int  # the first ones, translated one call each in a batch-1 case
    threads: int
    device: str = "cpu"
    ct2_patience: float | None = None  # CTranslate2's beam patience; None: the export README's

    def batches(self, batch: int) -> list[list[str]]:
        """The sentences of each call: the whole file in one call (batched by the engine), or for batch 1 the first
        few one call each."""
        if batch > 1:
            return [list(self.src)]
        return [[sentence] for sentence in self.src[: self.latency_sentences]]

    def sentences(self, batch: int) -> int:
        return len(self.src) if batch > 1 else min(self.latency_sentences, len(self.src))

    def model(self, label: str) -> Trained:
        return next(model for model in self.models if model.label == label)


class Decoded(NamedTuple):
    """What a real-mode case translates to: each sentence's translation, and the target pieces generated (EOS
    excluded)."""

    texts: list[str]
    pieces: int


class Timed(NamedTuple):
    """A case ready to time: `run` is the timed call; `output` (real mode) its translations, made untimed."""

    run: Callable[[], object]
    output: Callable[[], Decoded] | None = None


def hf_generate(model, src: torch.Tensor, beams: int, out_len: int) -> Callable[[], object]:
    mask = src != PAD_ID

    def run():
        with torch.inference_mode():
            return model.generate(
                input_ids=src,
                attention_mask=mask,
                num_beams=beams,
                do_sample=False,
                max_new_tokens=out_len,
                min_new_tokens=out_len,
                eos_token_id=None,
                length_penalty=1.0,
                early_stopping=False,
            )

    return run


def without_onednn(run: Callable[[], object]) -> Callable[[], object]:
    """`run` with oneDNN off, so our linear maps fall back to `F.linear` (MKL's sgemm on CPU)."""

    def unpacked():
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="TF32 acceleration")  # the flags' note about Intel GPUs
            with torch.backends.mkldnn.flags(enabled=False):
                return run()

    return unpacked


class Pieces:
    """A stand-in SentencePiece vocabulary for random ids: our four specials, then t4, t5, ..."""

    def __init__(self, size: int):
        self.size = size

    def get_piece_size(self) -> int:
        return self.size

    def id_to_piece(self, i: int) -> str:
        return ["<pad>", "<s>", "</s>", "<unk>"][i] if i < 4 else f"t{i}"


@functools.cache
def _search_model(setup: Setup, size: str, precision: str, compiled: bool = False):
    """Ours as a `Translator` holds it, made once: on CPU the inference copy in `precision` (with its compiled step
    where `compiled`), elsewhere the model."""
    model = ours(size, setup.vocab)
    model.load_state_dict(torch.load(Path(setup.folder) / f"{size}.pt"))
    if setup.device != "cpu":
        return model.to(setup.device, DTYPES[precision])
    copy = inference_copy(model, precision)
    if compiled:
        copy.compiled_step = compiled_step(model, decoded_in(model, precision))
    return copy


def search_call(strategy: str, **options) -> Callable[..., object]:
    """Our search of `strategy` (greedy, or beam with `BEAM` hypotheses) as a function of (model, src), `options`
    (`greedy_decode`'s keywords) bound."""
    if strategy == "beam":
        return functools.partial(beam_search, beam_size=BEAM, **options)
    return functools.partial(greedy_decode, **options)


def _ours(case: Case, setup: Setup) -> Timed:
    model = _search_model(setup, case.size, case.precision, case.variant == "compiled")
    options = dict(
        bos_id=BOS_ID,
        eos_id=-1,
        max_len=setup.out_len,
        use_cache=case.variant != "no cache",
        cuda_graphs=case.variant != "eager",
    )
    decode = search_call(case.strategy, **options)
    batches = [torch.tensor(rows, device=setup.device) for rows in setup.batches(case.batch)]

    def run():
        return [decode(model, src) for src in batches]

    return Timed(without_onednn(run) if case.variant == "unpacked" else run)


def ct2_compute_types() -> list[str]:
    """CTranslate2's plain compute types this CPU runs (`PLAIN_COMPUTE_TYPES`: float32, int8, int16, bfloat16, ...)."""
    import ctranslate2

    supported = ctranslate2.get_supported_compute_types("cpu")
    return [compute_type for compute_type in PLAIN_COMPUTE_TYPES if compute_type in supported]


@functools.cache
def _ct2_translator(folder: str, compute_type: str, threads: int):
    import ctranslate2

    return ctranslate2.Translator(folder, device="cpu", compute_type=compute_type, intra_threads=threads)


def _ctranslate2(case: Case, setup: Setup) -> Timed:
    translator = _ct2_translator(str(Path(setup.folder) / f"ct2_{case.size}"), case.precision, setup.threads)
    pieces = Pieces(setup.vocab)
    batches = [[[pieces.id_to_piece(i) for i in row[:-1]] for row in rows] for rows in setup.batches(case.batch)]
    fixed = dict(max_decoding_length=setup.out_len, min_decoding_length=setup.out_len, length_penalty=1.0)
    beam_size = BEAM if case.strategy == "beam" else 1

    def run():  # CTranslate2 appends EOS, so its sources are as long as ours
        return [translator.translate_batch(tokens, beam_size=beam_size, **fixed) for tokens in batches]

    return Timed(run)


@functools.cache
def _marian(setup: Setup, size: str, precision: str):
    torch.manual_seed(0)
    return marian(size, setup.vocab, dropout=0.0).to(setup.device, DTYPES[precision]).eval()


def _marianmt(case: Case, setup: Setup) -> Timed:
    model = _marian(setup, case.size, case.precision)
    beams = BEAM if case.strategy == "beam" else 1
    calls = [
        hf_generate(model, torch.tensor(rows, device=setup.device), beams, setup.out_len)
        for rows in setup.batches(case.batch)
    ]

    def run():
        return [call() for call in calls]

    return Timed(run)


def decoding(strategy: str, batch: int, precision: str) -> DecodingConfig:
    """Our decoding settings in a real-mode case: `transformer-translate`'s preset of `strategy` (greedy, or beam
    `BEAM`), with `batch` sentences a batch and `precision`."""
    beam = [f"beam_size={BEAM}"] if strategy == "beam" else []
    return presets.compose("decoding", strategy, [f"batch_size={batch}", f"precision={precision}", *beam])


@functools.cache
def _loaded(path: str):
    from transformer.runs.loading import load

    return load(path, device="cpu")


def _ours_real(case: Case, setup: RealSetup) -> Timed:
    """Ours as a user translates: `load(checkpoint).translator(decoding)`, then `translate(sentences)`."""
    model = setup.model(case.size)
    settings = decoding(case.strategy, case.batch, case.precision)
    translator = _loaded(model.path).translator(replace(settings, compiled=case.variant == "compiled"))
    calls = setup.batches(case.batch)

    def run():
        return [translator.translate(sentences) for sentences in calls]

    def output() -> Decoded:  # what `translate` returns, from the hypotheses it detokenizes
        best = [hyps[:1] for sentences in calls for _, hyps in translator.search(sentences)]
        texts = [translator.detokenize(hyps)[0] if hyps else "" for hyps in best]
        return Decoded(texts, sum(len(hyps[0].tokens) for hyps in best if hyps))

    return Timed(run, output)


def ctranslate2_translate(translator, src_spm, sentences: list[str], settings: dict, batch: int) -> list[list[str]]:
    """The best hypothesis' target pieces for each sentence, CTranslate2 called as the export's README shows
    (`settings`: its `readme_settings`, with the beam size of the case): the SentencePiece pieces of the sources
    sorted by length, in batches of `batch`, each run to its largest output limit a·(pieces + 1) + b (capped as ours
    is by the model's positions; CTranslate2 takes one limit per call) and each output cut to its own."""
    a, b, cap = settings["a"], settings["b"], settings["cap"]
    options = {key: settings[key] for key in ("beam_size", "length_penalty", "patience")}
    pieces = src_spm.encode(sentences, out_type=str)
    limits = [min(int(a * (len(p) + 1) + b), cap) for p in pieces]
    order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
    best: list[list[str]] = [[] for _ in pieces]
    for start in range(0, len(order), batch):
        rows = order[start : start + batch]
        longest = max(limits[i] for i in rows)
        results = translator.translate_batch([pieces[i] for i in rows], max_decoding_length=longest, **options)
        for i, result in zip(rows, results):
            best[i] = result.hypotheses[0][: limits[i]]
    return best


@functools.cache
def _sentencepiece(folder: str) -> tuple:
    """The export's source and target SentencePiece models (spm.model, or spm.src.model and spm.tgt.model)."""
    import sentencepiece

    joint = Path(folder) / "spm.model"
    paths = [joint] * 2 if joint.is_file() else [Path(folder) / f"spm.{side}.model" for side in ("src", "tgt")]
    return tuple(sentencepiece.SentencePieceProcessor(model_file=str(path)) for path in paths)


def _ctranslate2_real(case: Case, setup: RealSetup) -> Timed:
    """CTranslate2 on the checkpoint's export in the compute type `case.precision`, as its README shows."""
    model = setup.model(case.size)
    translator = _ct2_translator(model.export, case.precision, setup.threads)
    (src, tgt), calls = _sentencepiece(model.export), setup.batches(case.batch)
    from transformer.export.ctranslate2 import readme_settings

    settings = readme_settings(model.max_positions) | dict(beam_size=BEAM if case.strategy == "beam" else 1)
    if setup.ct2_patience is not None:
        settings["patience"] = setup.ct2_patience
    translate = functools.partial(ctranslate2_translate, translator, src, settings=settings, batch=case.batch)

    def run():
        return [tgt.decode(translate(sentences)) for sentences in calls]

    def output() -> Decoded:
        best = [hyp for sentences in calls for hyp in translate(sentences)]
        return Decoded(tgt.decode(best), sum(map(len, best)))

    return Timed(run, output)


ENGINES = {"ours": _ours, "ctranslate2": _ctranslate2, "marianmt": _marianmt}
REAL_ENGINES = {"ours": _ours_real, "ctranslate2": _ctranslate2_real}


class EngineError(Exception):
    """A case that failed in its engine's process."""


def _engine_process(conn, engine: str, setup: Setup | RealSetup) -> None:
    """In a process of its own: for each (case, "run" or "output") received, build the case at its first call, then
    run it or make its translations; answer (True, None or the `Decoded`), or (False, why it failed)."""
    torch.set_num_threads(setup.threads)
    factories = REAL_ENGINES if isinstance(setup, RealSetup) else ENGINES
    built: dict[Case, Timed] = {}
    while (message := conn.recv()) is not None:
        case, want = message
        try:
            if case not in built:
                built[case] = factories[engine](case, setup)
            if want == "output":
                conn.send((True, built[case].output()))
                continue
            built[case].run()
            if setup.device == "cuda":
                torch.cuda.synchronize()
            conn.send((True, None))
        except Exception as error:  # the parent reports it and stops every engine
            conn.send((False, f"{type(error).__name__}: {error}"))


def process_of(case: Case) -> str:
    """Which engine process runs `case`: one for ours (one torch thread pool for every precision), one per
    CTranslate2 compute type (two `ctranslate2.Translator`s in one process ran each 2.2-2.8x slower, Zen 3), one for
    MarianMT."""
    return f"{case.engine} {case.precision}" if case.engine == "ctranslate2" else case.engine


class Engines:
    """Engine processes (`process_of`), each started at its first case, for the length of a `with` block;
    `run(case)` runs a case in its process, `output(case)` (real mode) returns its translations."""

    def __init__(self, setup: Setup | RealSetup):
        self.setup = setup
        self.conns, self.processes = {}, []

    def __enter__(self) -> "Engines":
        return self

    def _conn(self, case: Case):
        """The pipe to `case`'s process, started here the first time."""
        name = process_of(case)
        if name not in self.conns:
            context = multiprocessing.get_context("spawn")
            conn, child_end = context.Pipe()
            args = (child_end, case.engine, self.setup)
            process = context.Process(target=_engine_process, args=args, daemon=True)
            process.start()
            self.conns[name] = conn
            self.processes.append(process)
        return self.conns[name]

    def _ask(self, case: Case, want: str):
        conn = self._conn(case)
        conn.send((case, want))
        ok, answer = conn.recv()
        if not ok:
            raise EngineError(f"{' '.join(filter(None, map(str, case)))}: {answer}")
        return answer

    def run(self, case: Case) -> None:
        self._ask(case, "run")

    def output(self, case: Case) -> Decoded:
        return self._ask(case, "output")

    def __exit__(self, *exc) -> None:
        for conn in self.conns.values():
            conn.send(None)
        for process in self.processes:
            process.join()
