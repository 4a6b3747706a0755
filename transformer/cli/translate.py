"""`transformer-translate`: translate sentences given inline, in a file, or on stdin.

Translations alone go to stdout (or output=FILE), one line per input line in input order (an
empty line stays empty); logs and progress go to stderr. With decoding.n_best > 1
each input line gives n_best lines "LINE<TAB>SCORE<TAB>TRANSLATION"; a line left
untranslated (blank, too long, or not UTF-8) gives one line "LINE<TAB>0.0000<TAB>".
A line that is not valid UTF-8 is logged by its number and left untranslated; the
other lines are translated, and the command then exits with status 2. With
split_sentences=true each line is split into sentences (a paragraph per line), which
are translated and joined back on one line. With prefix=true an input line is "SOURCE<TAB>PREFIX" (prefix_file=FILE:
one prefix per input line) and its translation starts with PREFIX exactly, an unfinished last word completed; with
constraints=true the fields after SOURCE (and PREFIX) are target phrases the translation must hold (decoding=beam;
decoding.glossary=FILE adds its terms found in the source); with decoding.alternatives=K each line gives K lines
"LINE<TAB>SCORE<TAB>TRANSLATION", one per next piece.

The input is read, translated and written `chunk_lines` lines at a time (`transformer.decoding.chunks`): each chunk's
translations are printed and flushed when it is done, so a pipe sees them before the input ends, and memory does
not grow with the number of lines. With output=FILE the finished chunks wait beside FILE (`.FILE.chunks/`) and
FILE is written whole after the last; a killed run started again continues after its last finished chunk.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import count, repeat, zip_longest
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from transformer.cli import hydra_app, user_errors
from transformer.core.config import TranslateConfig
from transformer.core.errors import UserError
from transformer.data.sources import count_lines, decode_line, raw_lines
from transformer.decoding.chunks import (
    Chunk,
    ChunkedFile,
    StreamSink,
    chunk_seed,
    lines_text,
    show_progress,
    translate_in_chunks,
)
from transformer.decoding.glossary import load_glossary
from transformer.decoding.sentences import split_line

if TYPE_CHECKING:
    import torch

    from transformer.decoding.alignment import Aligner
    from transformer.decoding.translator import Searched, TextTranslator
    from transformer.runs.loading import Loaded

log = logging.getLogger(__name__)


@dataclass
class BadLines:
    """The input lines that are not UTF-8: how many, and the first numbers (for the message at the end)."""

    count: int = 0
    first: list[int] = field(default_factory=list)

    def add(self, number: int) -> None:
        self.count += 1
        if len(self.first) < 10:
            self.first.append(number)

    def check(self) -> None:
        """Refuse (status 2) once every line is translated, if some line was not UTF-8."""
        if self.count:
            shown = ", ".join(map(str, self.first)) + (", ..." if self.count > len(self.first) else "")
            raise UserError(
                f"{self.count} input line(s) not valid UTF-8 (line {shown}) were left untranslated; "
                "re-encode the input as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
            )


def decode_lines(raw: Iterable[bytes], name: str, bad: BadLines, start: int = 1) -> Iterator[str]:
    """Input lines as text; a line that is not UTF-8 is logged, becomes '' and is counted in `bad`."""
    for number, line in enumerate(raw, start=start):
        try:
            yield decode_line(line, f"{name} line {number}")
        except UserError as err:
            log.warning("%s; it is left untranslated (an empty output line)", err)
            bad.add(number)
            yield ""


def interactive(
    translator: TextTranslator, bad: BadLines, prefix: bool = False, constraints: bool = False, aligner=None
) -> None:
    """Translate each line as it is typed (with `prefix` and `constraints`, its fields as `split_fields` reads them;
    with `aligner`, its word alignment after a tab), until end of input (Ctrl-D); prompts go to stderr."""
    print("Type a sentence and press Enter; Ctrl-D quits.", file=sys.stderr)
    number = 0
    while True:
        print("> ", end="", file=sys.stderr, flush=True)
        raw = sys.stdin.buffer.readline()
        if not raw:
            print(file=sys.stderr)
            return
        number += 1
        line = next(decode_lines([raw], "input", bad, start=number))
        fields = split_fields([line], prefix, constraints)
        results = translator.search(fields.sources, prefixes=fields.prefixes, constraints=fields.constraints)
        links = align_results(aligner, results, 1) if aligner else None
        print(format_results(translator, results, 1, number - 1, fields.prefixes, links), end="", flush=True)


def format_results(
    translator: TextTranslator,
    results: Searched,
    n_best: int,
    start: int = 0,
    prefixes: list[str] | None = None,
    alignments: list[list[list[tuple[int, int]]]] | None = None,
) -> str:
    """The best translation per input line, or with n_best > 1 "LINE<TAB>SCORE<TAB>TRANSLATION" lines (one
    "LINE<TAB>0.0000<TAB>" line for a line left untranslated); `start`: the number of input lines before these;
    `prefixes`: what each line's translations start with; `alignments`: each hypothesis's word links, written
    after a tab behind its translation (Pharaoh)."""
    from transformer.decoding.alignment import pharaoh  # torch: see transformer.cli

    out = []
    for number, (_, hyps), prefix, links in zip(
        count(start + 1), results, prefixes or repeat(""), alignments or repeat(None)
    ):
        texts = translator.detokenize(hyps, prefix)
        if links is not None:
            texts = [f"{text}\t{pharaoh(pairs)}" for text, pairs in zip(texts, links)] or ["\t"]
        if n_best == 1:
            out.append(texts[0] if texts else "")
        elif not hyps:
            out.append(f"{number}\t{0.0:.4f}\t{texts[0] if texts else ''}")
        else:
            out.extend(f"{number}\t{hyp.score:.4f}\t{text}" for text, hyp in zip(texts, hyps))
    return lines_text(out)


def align_results(aligner: Aligner, results: Searched, batch_size: int) -> list[list[list[tuple[int, int]]]]:
    """Each hypothesis's word links, per sentence."""
    pairs = [(src, hyp.tokens) for src, hyps in results for hyp in hyps]
    found = iter(aligner.links([s for s, _ in pairs], [t for _, t in pairs], batch_size))
    return [[next(found) for _ in hyps] for _, hyps in results]


def translate_markup(translator: TextTranslator, aligner: Aligner, chunk: Chunk, generator, bar) -> str:
    """markup=xml: each line translated with its markup carried across; a line whose markup is not well-formed is
    noted and left untranslated."""
    from transformer.decoding.marked_text import translate_marked

    out = translate_marked(translator, aligner, chunk.lines, generator, bar)
    for number, result in enumerate(out, start=chunk.start + 1):
        if not isinstance(result, str):
            log.warning("line %d: %s; it is left untranslated (an empty line)", number, result)
    return lines_text([result if isinstance(result, str) else "" for result in out])


def translate_paragraphs(translator: TextTranslator, lines: list[str], generator: torch.Generator | None = None) -> str:
    """split_sentences=true: every line split into sentences, all translated together, joined back line by line."""
    layouts = [split_line(line) for line in lines]
    sentences = [s for layout in layouts for s in layout]
    translations = iter(translator.translate(sentences, generator=generator))
    return lines_text([" ".join(next(translations) for _ in layout) for layout in layouts])


def plot_attention(
    translator: TextTranslator,
    results: Searched,
    directory: Path,
    layer: int | None,
    start: int,
    aligner: Aligner | None = None,
) -> None:
    """One cross-attention heatmap PNG per translated line: DIR/0001.png, DIR/0002.png, ... (`start`: lines before),
    `aligner`'s links framed on it."""
    from transformer.decoding.heatmaps import (  # matplotlib: seconds of start-up, only here
        attention_figure,
        save_figure,
    )

    for number, (src_ids, hyps) in enumerate(results, start=start + 1):
        if hyps:
            tokens = hyps[0].tokens
            fig = attention_figure(translator.model, translator.tokenizer, src_ids, tokens, layer, aligner)
            save_figure(fig, directory / f"{number:04d}.png")


@dataclass
class Fields:
    """Input lines split into their fields: sources, and prefixes and constraint phrases where the lines hold them."""

    sources: list[str]
    prefixes: list[str] | None = None
    constraints: list[list[str]] | None = None


def split_fields(lines: list[str], prefix: bool, constraints: bool) -> Fields:
    """Lines "SOURCE[<TAB>PREFIX][<TAB>PHRASE...]" as their fields (`prefix`, `constraints`: which they hold; a
    missing field is empty)."""
    if not (prefix or constraints):
        return Fields(lines)
    rows = [line.split("\t") if constraints else line.split("\t", 1) for line in lines]
    fields = Fields([row[0] for row in rows])
    if prefix:
        fields.prefixes = [row[1] if len(row) > 1 else "" for row in rows]
    if constraints:
        fields.constraints = [row[1 + prefix :] for row in rows]
    return fields


def translate_chunk(
    cfg: DictConfig, translator: TextTranslator, aligner: Aligner | None, chunk: Chunk, bar: tqdm
) -> str:
    """The output text of one chunk of input lines, as the settings ask (paragraphs, prefixes, n-best or
    alternatives, with `aligner` word alignments); its attention plots."""
    generator = translator.generator(chunk_seed(cfg.decoding.seed, chunk.index))
    if cfg.split_sentences:
        return translate_paragraphs(translator, chunk.lines, generator)
    if cfg.markup == "xml":
        return translate_markup(translator, aligner, chunk, generator, bar)
    fields = split_fields(chunk.lines, prefixed(cfg), cfg.constraints)
    results = translator.search(
        fields.sources, generator=generator, bar=bar, prefixes=fields.prefixes, constraints=fields.constraints
    )
    if cfg.plot_attention:
        plot_attention(translator, results, Path(cfg.plot_attention), cfg.plot_layer, chunk.start, aligner)
    per_line = max(cfg.decoding.n_best, cfg.decoding.alternatives)
    links = align_results(aligner, results, cfg.decoding.batch_size) if cfg.alignments else None
    return format_results(translator, results, per_line, chunk.start, fields.prefixes, links)


def prefixed(cfg: DictConfig) -> bool:
    """Whether input lines come with a prefix each (prefix=true, or prefix_file=FILE joined to them)."""
    return bool(cfg.prefix or cfg.prefix_file)


def with_prefixes(lines: Iterable[str], path: Path, bad: BadLines, constraints: bool) -> Iterator[str]:
    """Each input line with the line of the same number in `path` as its prefix, "SOURCE<TAB>PREFIX" (then its
    constraint phrases, if it has them; else a tab in the source becomes a space, as SentencePiece reads it); refuses
    files of different lengths once one of them ends."""
    prefixes = decode_lines(raw_lines(path), str(path), bad)
    for number, (line, prefix) in enumerate(zip_longest(lines, prefixes), start=1):
        if line is None or prefix is None:
            shorter = "prefix_file" if prefix is None else "the input"
            raise UserError(f"prefix_file={path} and the input differ in length: {shorter} ends before line {number}")
        source, *phrases = line.split("\t") if constraints else [line.replace("\t", " ")]
        yield "\t".join([source, prefix, *phrases])


def input_lines(cfg: DictConfig, bad: BadLines) -> Iterable[str]:
    """The lines to translate, read lazily: inline sentences, the `input` file, or stdin (not a terminal); with
    prefix_file=FILE, each joined to its prefix."""
    if cfg.sentences:
        lines: Iterable[str] = list(cfg.sentences)
    elif cfg.input:
        lines = decode_lines(raw_lines(Path(cfg.input)), str(cfg.input), bad)
    else:
        lines = decode_lines(sys.stdin.buffer, "input", bad)
    return with_prefixes(lines, Path(cfg.prefix_file), bad, cfg.constraints) if cfg.prefix_file else lines


def total_lines(cfg: DictConfig) -> int | None:
    """How many lines there are to translate, where known before reading them (for the progress bar)."""
    if cfg.sentences:
        return len(cfg.sentences)
    return count_lines(Path(cfg.input)) if cfg.input else None


def model_files(loaded: Loaded) -> list[list]:
    """Each model file's path, size and modification time: a model retrained or replaced in place is another job."""
    files = [member.path for member in loaded.members]
    return [[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in files]


def model_job(cfg: DictConfig, loaded: Loaded) -> dict:
    """What a chunk's output depends on besides its lines, for any command that writes chunks of a model's output:
    the model files, the engine, the decoding, the alignment asked for, the chunk size."""
    return {
        "models": model_files(loaded),
        "engine": cfg.engine,
        "decoding": OmegaConf.to_container(cfg.decoding),
        "alignments": OmegaConf.to_container(cfg.alignment) if cfg.alignments else False,
        "chunk_lines": cfg.chunk_lines,
    }


def job_record(cfg: DictConfig, loaded: Loaded) -> dict:
    """What a chunk's translation depends on besides its lines (which are checked chunk by chunk)."""
    steering = {"prefixed": prefixed(cfg), "constraints": cfg.constraints}
    return model_job(cfg, loaded) | steering | {"split_sentences": cfg.split_sentences, "markup": cfg.markup}


def translate_input(cfg: DictConfig, loaded: Loaded, translator: TextTranslator, bad: BadLines) -> None:
    """Translate the input chunk by chunk into stdout, or into output=FILE (resuming a killed run)."""
    sink = ChunkedFile(Path(cfg.output), job_record(cfg, loaded)) if cfg.output else StreamSink(sys.stdout)
    progress = show_progress(cfg.progress)
    total = total_lines(cfg) if progress else None
    aligned = cfg.alignments or cfg.markup == "xml" or cfg.plot_attention
    aligner = loaded.aligner(cfg.alignment) if aligned else None
    translate = functools.partial(translate_chunk, cfg, translator, aligner)
    counts = translate_in_chunks(input_lines(cfg, bad), translate, sink, cfg.chunk_lines, progress, total)
    if isinstance(sink, ChunkedFile):
        sink.finish(counts.chunks)
        log.info("wrote the translations of %d lines to %s", counts.lines, cfg.output)
    if cfg.plot_attention:
        log.info("attention heatmaps written to %s", cfg.plot_attention)


def check_settings(cfg: DictConfig, prompt: bool) -> None:
    """Refuse combinations of settings that cannot work, before the model loads (`prompt`: an interactive session)."""
    from transformer.runs.loading import checkpoint_paths

    if cfg.plot_attention and Path(cfg.plot_attention).is_file():
        raise UserError(f"plot_attention={cfg.plot_attention} is a file; give a folder for the PNG files")
    if cfg.plot_attention and len(checkpoint_paths(cfg.checkpoint)) > 1:
        raise UserError("plot_attention draws one model's attention: give one checkpoint=RUN_DIR")
    if cfg.split_sentences and (
        cfg.decoding.n_best > 1 or cfg.decoding.alternatives or cfg.plot_attention or cfg.alignments
    ):
        raise UserError(
            "split_sentences=true prints one line per input line: no n_best > 1, alternatives, plot_attention or "
            "alignments"
        )
    if (cfg.alignments or cfg.markup != "none") and cfg.engine != "pytorch":
        raise UserError("alignments and markup read our model's attention: use engine=pytorch with a checkpoint")
    steered = prefixed(cfg) or cfg.constraints or cfg.split_sentences or cfg.alignments or cfg.plot_attention
    if cfg.markup != "none" and (steered or cfg.decoding.n_best > 1 or cfg.decoding.alternatives or prompt):
        raise UserError(
            "markup=xml writes each line's best translation with its markup: no prefix, constraints, "
            "split_sentences, alignments, plot_attention, n_best > 1 or alternatives, and no interactive prompt "
            "(give input=FILE, sentences=[...] or pipe the text)"
        )
    if cfg.decoding.glossary:
        load_glossary(cfg.decoding.glossary)  # its mistakes before the model loads
    if cfg.prefix_file and not Path(cfg.prefix_file).is_file():
        raise UserError(f"prefix_file={cfg.prefix_file} is not a file; give one prefix per input line in it")
    if cfg.prefix_file and prompt:
        raise UserError(
            "prefix_file=FILE goes with input=FILE, sentences=[...] or piped text; "
            "at a prompt, type SOURCE<TAB>PREFIX with prefix=true"
        )
    if not cfg.output:
        return
    if prompt:
        raise UserError("output=FILE translates input=FILE, sentences=[...] or text piped on stdin, not a terminal")
    if Path(cfg.output).is_dir():
        raise UserError(f"output={cfg.output} is a folder; give a file name to write the translations to")
    if cfg.input and Path(cfg.output).resolve() == Path(cfg.input).resolve():
        raise UserError(f"output={cfg.output} is the input file; give another file name")


@hydra_app("translate", TranslateConfig)
def main(cfg: DictConfig) -> None:
    from transformer.runs.loading import load  # torch: see transformer.cli

    with user_errors():
        prompt = not (cfg.sentences or cfg.input) and sys.stdin.isatty()
        check_settings(cfg, prompt)
        loaded = load(cfg.checkpoint, engine=cfg.engine, device=cfg.device)
        translator = loaded.translator(cfg.decoding)
        bad = BadLines()
        if prompt:
            aligner = loaded.aligner(cfg.alignment) if cfg.alignments else None
            interactive(translator, bad, cfg.prefix, cfg.constraints, aligner)
        else:
            translate_input(cfg, loaded, translator, bad)
        bad.check()


if __name__ == "__main__":
    main()
