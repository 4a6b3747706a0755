"""The engines `benchmark_decoding.py` times, each in a process of its own: ours, CTranslate2 and MarianMT.

A process that has run CTranslate2 runs torch up to 1.8× slower, so no two engines share one. `Engines`
starts them; each builds a case at its first call (loads, packs, quantizes: the warm-up) and answers
each call of it once the call is done (on a GPU, once the GPU is).
"""

import functools
import multiprocessing
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from transformer.decoding import beam_search, greedy_decode
from transformer.fast_inference import inference_copy
from transformer.marian_reference import marian, model_config
from transformer.model import Transformer
from transformer.precision import COMPUTE_TYPES
from transformer.tokenizer import BOS_ID, PAD_ID

BEAM = 5
CT2_PRECISIONS = COMPUTE_TYPES  # ours -> CTranslate2's compute_type
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
    variant: str = ""  # "", "no cache", "unpacked" or "eager" (no CUDA graphs)


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
def _search_model(setup: Setup, size: str, precision: str):
    """Ours as a `Translator` holds it, made once: on CPU the inference copy in `precision`, elsewhere the model."""
    model = ours(size, setup.vocab)
    model.load_state_dict(torch.load(Path(setup.folder) / f"{size}.pt"))
    if setup.device != "cpu":
        return model.to(setup.device, DTYPES[precision])
    return inference_copy(model, precision)


def search_call(strategy: str, **options) -> Callable[..., object]:
    """Our search of `strategy` (greedy, or beam with `BEAM` hypotheses) as a function of (model, src), `options`
    (`greedy_decode`'s keywords) bound."""
    if strategy == "beam":
        return functools.partial(beam_search, beam_size=BEAM, **options)
    return functools.partial(greedy_decode, **options)


def _ours(case: Case, setup: Setup) -> Callable[[], object]:
    model = _search_model(setup, case.size, case.precision)
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

    return without_onednn(run) if case.variant == "unpacked" else run


@functools.cache
def _ct2_translator(setup: Setup, size: str, compute_type: str):
    import ctranslate2

    folder = str(Path(setup.folder) / f"ct2_{size}")
    return ctranslate2.Translator(folder, device="cpu", compute_type=compute_type, intra_threads=setup.threads)


def _ctranslate2(case: Case, setup: Setup) -> Callable[[], object]:
    translator = _ct2_translator(setup, case.size, CT2_PRECISIONS[case.precision])
    pieces = Pieces(setup.vocab)
    batches = [[[pieces.id_to_piece(i) for i in row[:-1]] for row in rows] for rows in setup.batches(case.batch)]
    fixed = dict(max_decoding_length=setup.out_len, min_decoding_length=setup.out_len, length_penalty=1.0)
    beam_size = BEAM if case.strategy == "beam" else 1

    def run():  # CTranslate2 appends EOS, so its sources are as long as ours
        return [translator.translate_batch(tokens, beam_size=beam_size, **fixed) for tokens in batches]

    return run


@functools.cache
def _marian(setup: Setup, size: str, precision: str):
    torch.manual_seed(0)
    return marian(size, setup.vocab, dropout=0.0).to(setup.device, DTYPES[precision]).eval()


def _marianmt(case: Case, setup: Setup) -> Callable[[], object]:
    model = _marian(setup, case.size, case.precision)
    beams = BEAM if case.strategy == "beam" else 1
    calls = [
        hf_generate(model, torch.tensor(rows, device=setup.device), beams, setup.out_len)
        for rows in setup.batches(case.batch)
    ]

    def run():
        return [call() for call in calls]

    return run


ENGINES = {"ours": _ours, "ctranslate2": _ctranslate2, "marianmt": _marianmt}


class EngineError(Exception):
    """A case that failed in its engine's process."""


def _engine_process(conn, engine: str, setup: Setup) -> None:
    """In a process of its own: run each case received (its first call builds it); answer once it is done, with
    None, or with why it failed."""
    torch.set_num_threads(setup.threads)
    runs: dict[Case, Callable[[], object]] = {}
    while (case := conn.recv()) is not None:
        try:
            if case not in runs:
                runs[case] = ENGINES[engine](case, setup)
            runs[case]()
            if setup.device == "cuda":
                torch.cuda.synchronize()
            conn.send(None)
        except Exception as error:  # the parent reports it and stops every engine
            conn.send(f"{type(error).__name__}: {error}")


class Engines:
    """One process per engine, for the length of a `with` block; `run(case)` runs a case in its engine's process."""

    def __init__(self, engines: set[str], setup: Setup):
        self.engines, self.setup = sorted(engines), setup
        self.conns, self.processes = {}, []

    def __enter__(self) -> "Engines":
        context = multiprocessing.get_context("spawn")
        for engine in self.engines:
            conn, child_end = context.Pipe()
            process = context.Process(target=_engine_process, args=(child_end, engine, self.setup), daemon=True)
            process.start()
            self.conns[engine] = conn
            self.processes.append(process)
        return self

    def run(self, case: Case) -> None:
        self.conns[case.engine].send(case)
        if (failure := self.conns[case.engine].recv()) is not None:
            raise EngineError(f"{' '.join(filter(None, map(str, case)))}: {failure}")

    def __exit__(self, *exc) -> None:
        for conn in self.conns.values():
            conn.send(None)
        for process in self.processes:
            process.join()
