"""Translating in chunks (`decoding.chunks`): chunked output equals unchunked output, a file resumes after its
finished chunks, changed input or settings are never appended to, and a pipe sees the first chunk at once."""

import contextlib
import functools
import io
import logging
import select
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.decoding.test_translator import translator
from transformer.cli.translate import format_results, translate_chunk
from transformer.decoding.chunks import ChunkedFile, StreamSink, show_progress, translate_in_chunks

BIN = Path(sys.executable).parent
GREEDY = ("decoding=greedy", "decoding.precision=fp32")
LONG = " ".join(["chien"] * 40)  # more tokens than the tiny model's 16 positions: left untranslated
LINES = ["un chien rouge", "", "le chat dort dans le parc", LONG, "un homme", "  ", "la femme mange", "le parc bleu"]


def settings(n_best: int = 1, seed: int = 0):
    """What `translate_chunk` reads of transformer-translate's settings."""
    return OmegaConf.create(
        {
            "decoding": {"seed": seed, "n_best": n_best, "alternatives": 0},
            "split_sentences": False,
            "plot_attention": None,
            "prefix": False,
            "prefix_file": None,
            "constraints": False,
            "alignments": False,
            "markup": "none",
        }
    )


def chunked(t, lines: list[str], chunk_lines: int, n_best: int = 1) -> str:
    out = io.StringIO()
    translate = functools.partial(translate_chunk, settings(n_best), t, None)
    counts = translate_in_chunks(iter(lines), translate, StreamSink(out), chunk_lines)
    assert (counts.lines, counts.skipped, counts.chunks) == (len(lines), 0, -(-len(lines) // chunk_lines))
    return out.getvalue()


@pytest.mark.parametrize("chunk_lines", [1, 3, 100])
@pytest.mark.parametrize(("strategy", "n_best"), [("greedy", 1), ("beam", 3)])
def test_chunked_output_equals_unchunked(chunk_lines, strategy, n_best):
    t = translator(strategy, beam_size=3, n_best=n_best)
    whole = format_results(t, t.search(LINES), n_best)
    assert chunked(t, LINES, chunk_lines, n_best) == whole
    if n_best > 1:  # line numbers count across chunks: every input line, in order
        numbers = [int(row.split("\t")[0]) for row in whole.splitlines()]
        assert sorted(set(numbers)) == list(range(1, len(LINES) + 1)) and numbers == sorted(numbers)
        assert numbers.count(4) == 1  # the over-long line: one "4<TAB>0.0000<TAB>" line


class Interrupted(Exception):
    """Stands for a kill in the middle of a chunk."""


def into_file(t, path: Path, lines: list[str], job: dict, stop_at: int | None = None) -> list[int]:
    """Translate `lines` (3 per chunk) into `path`; raise Interrupted when chunk `stop_at` starts. The chunks this
    run translated."""
    done = []

    def translate(chunk, bar) -> str:
        if chunk.index == stop_at:
            raise Interrupted
        done.append(chunk.index)
        return translate_chunk(settings(seed=job["seed"]), t, None, chunk, bar)

    sink = ChunkedFile(path, job)
    with pytest.raises(Interrupted) if stop_at is not None else contextlib.nullcontext():
        sink.finish(translate_in_chunks(iter(lines), translate, sink, 3).chunks)
    return done


def test_an_interrupted_file_resumes_after_its_finished_chunks(tmp_path, caplog):
    t, out = translator("sample"), tmp_path / "out.txt"  # sampling: each chunk must draw from its own seed
    assert into_file(t, tmp_path / "straight.txt", LINES, {"seed": 0}) == [0, 1, 2]
    assert into_file(t, out, LINES, {"seed": 0}, stop_at=2) == [0, 1]
    assert not out.exists()  # the file appears whole, at the end; the finished chunks wait beside it
    assert sorted(p.name for p in (tmp_path / ".out.txt.chunks").glob("*.txt")) == ["000000.txt", "000001.txt"]
    with caplog.at_level(logging.INFO):
        assert into_file(t, out, LINES, {"seed": 0}) == [2]
    assert "resuming at line 7" in caplog.text
    assert out.read_bytes() == (tmp_path / "straight.txt").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "straight.txt"]


def test_changed_input_or_settings_are_translated_again_not_appended_to(tmp_path, caplog):
    t, out = translator("sample"), tmp_path / "out.txt"
    changed = [*LINES[:4], "un chat bleu", *LINES[5:]]  # line 5: chunk 1
    into_file(t, tmp_path / "straight.txt", changed, {"seed": 0})
    into_file(t, out, LINES, {"seed": 0}, stop_at=2)
    with caplog.at_level(logging.WARNING):
        assert into_file(t, out, changed, {"seed": 0}) == [1, 2]  # chunk 0 is the same, chunk 1 is not
    assert "lines 4-6 changed since they were translated" in caplog.text
    assert out.read_bytes() == (tmp_path / "straight.txt").read_bytes()

    into_file(t, tmp_path / "seed1.txt", changed, {"seed": 1})
    into_file(t, out, changed, {"seed": 0}, stop_at=2)
    assert into_file(t, out, changed, {"seed": 1}) == [0, 1, 2]  # other settings: it starts over
    assert "a translation with other settings: starting over" in caplog.text
    assert out.read_bytes() == (tmp_path / "seed1.txt").read_bytes()

    into_file(t, tmp_path / "short.txt", changed[:5], {"seed": 1})
    into_file(t, out, changed, {"seed": 1}, stop_at=2)
    assert into_file(t, out, changed[:5], {"seed": 1}) == [1]  # a shorter input: its own last chunk, no more
    assert out.read_bytes() == (tmp_path / "short.txt").read_bytes()


def test_the_progress_bar_shows_on_a_terminal_or_when_asked(monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert (show_progress(None), show_progress(True), show_progress(False)) == (False, True, False)


@pytest.mark.slow
def test_a_pipe_gets_the_first_chunk_before_the_input_ends(cli_setup):
    command = [str(BIN / "transformer-translate"), cli_setup["ckpt"], *GREEDY, "chunk_lines=2"]
    whole = subprocess.run(command, input=b"un chien\nle chat\nun homme\nle parc\n", capture_output=True, timeout=300)
    assert whole.returncode == 0, whole.stderr.decode()[-2000:]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        process.stdin.write(b"un chien\nle chat\nun homme\n")
        process.stdin.flush()  # and stdin stays open
        assert select.select([process.stdout], [], [], 300)[0], "no translation before the input ended"
        first = [process.stdout.readline(), process.stdout.readline()]
        assert process.poll() is None  # still reading its input
        process.stdin.write(b"le parc\n")
        process.stdin.close()
        rest = process.stdout.read()
        assert process.wait(timeout=300) == 0
    finally:
        process.kill()
    assert b"".join(first) + rest == whole.stdout and len(whole.stdout.splitlines()) == 4


@pytest.mark.slow
def test_output_refuses_the_input_file_and_a_folder(cli_setup, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("un chien\n")
    for output, words in ((source, "is the input file"), (tmp_path, "is a folder")):
        argv = [str(BIN / "transformer-translate"), cli_setup["ckpt"], f"input={source}", f"output={output}"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert words in line
    assert source.read_text() == "un chien\n"
