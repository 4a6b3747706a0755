"""Input a user gets wrong: bad bytes on every input path, blank lines with n_best, and evaluation file names."""

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from transformer.cli.evaluate import decoding_label
from transformer.core.config import DecodingConfig

BIN = Path(sys.executable).parent
BAD = b"un chien\n\xff\xfe le chat\nle chat\n"  # line 2 is not UTF-8 (latin-1 bytes)
# fp32: a line's translation then does not depend on the lines searched beside it (int8's kernel depends on the batch)
GREEDY = ("decoding=greedy", "decoding.precision=fp32")


def _translate(cli_setup, *args: str, **kwargs) -> subprocess.CompletedProcess:
    argv = [str(BIN / "transformer-translate"), cli_setup["ckpt"], *GREEDY, *args]
    return subprocess.run(argv, capture_output=True, timeout=300, **kwargs)


def _valid_lines(cli_setup) -> list[str]:
    """The translations of lines 1 and 3 without line 2 (the form the README gives for inline sentences)."""
    result = _translate(cli_setup, 'sentences=["un chien","le chat"]')
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return result.stdout.decode().split("\n")[:2]


def _assert_bad_line_policy(result: subprocess.CompletedProcess, valid: list[str]) -> None:
    stderr = result.stderr.decode()
    assert result.returncode == 2 and "Traceback" not in stderr
    assert result.stdout.decode().split("\n") == [valid[0], "", valid[1], ""]  # line 2 left empty, 1 and 3 kept
    assert "line 2: not valid UTF-8" in stderr
    (error,) = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert "1 input line(s) not valid UTF-8 (line 2)" in error


@pytest.mark.slow
def test_bad_bytes_on_stdin_and_in_an_input_file_are_one_line_s_problem(cli_setup, tmp_path):
    valid = _valid_lines(cli_setup)
    _assert_bad_line_policy(_translate(cli_setup, input=BAD), valid)
    (tmp_path / "in.txt").write_bytes(BAD)
    _assert_bad_line_policy(_translate(cli_setup, f"input={tmp_path / 'in.txt'}"), valid)


@pytest.mark.slow
def test_the_interactive_prompt_survives_a_bad_line(cli_setup):
    valid = _valid_lines(cli_setup)
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [str(BIN / "transformer-translate"), cli_setup["ckpt"], *GREEDY],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(terminal)
    os.write(controller, BAD + b"\x04")  # Ctrl-D ends the session
    out, err = proc.communicate(timeout=300)
    os.close(controller)
    _assert_bad_line_policy(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), valid)
    assert b"Ctrl-D quits" in err


@pytest.mark.slow
def test_blank_and_over_long_lines_give_a_line_with_n_best(cli_setup, tmp_path):
    long = " ".join(["chien"] * 1500)  # more tokens than the model's max_positions
    (tmp_path / "in.txt").write_text(f"un chien\n\n{long}\nle chat\n")
    result = _translate(cli_setup, f"input={tmp_path / 'in.txt'}", "decoding=beam", "decoding.n_best=2")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    rows = [line.split("\t") for line in result.stdout.decode().splitlines()]
    assert [int(r[0]) for r in rows] == [1, 1, 2, 3, 4, 4]
    assert rows[2] == ["2", "0.0000", ""] and rows[3] == ["3", "0.0000", ""]


def test_every_decoding_has_its_own_hypothesis_file_name():
    def label(**settings) -> str:
        return decoding_label(OmegaConf.merge(OmegaConf.structured(DecodingConfig), settings))

    names = [
        label(strategy="greedy"),
        label(strategy="beam"),
        label(strategy="beam", beam_size=4),
        label(strategy="beam", length_penalty=0.6),
        label(strategy="sample"),
        label(strategy="sample", seed=1),
        label(strategy="sample", temperature=0.7),
        label(strategy="sample", top_p=0.9),
        label(strategy="greedy", min_len=3),
    ]
    assert names[:3] == ["greedy", "beam5", "beam4"] and names[4] == "sample-t1-k0-p1-seed0"
    assert len(set(names)) == len(names)


@pytest.mark.slow
def test_evaluate_keeps_one_file_per_decoding(cli_setup):
    ckpt_dir = Path(cli_setup["tmp"]) / "run" / "checkpoints"
    for decoding in (["decoding=beam"], ["decoding=sample", "decoding.seed=3"]):
        argv = [str(BIN / "transformer-evaluate"), cli_setup["ckpt"], "split=toy", *decoding]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
    names = sorted(p.name for p in ckpt_dir.glob("*.hyp"))
    assert names == ["best.toy.beam5-fp32.hyp", "best.toy.sample-t1-k0-p0.9-seed3-fp32.hyp"]  # the precision it ran in
    for name in names:
        assert len((ckpt_dir / name).read_text().split("\n")) == 11  # 10 hypotheses and the last newline


def test_prefixes_in_the_input_or_a_file_start_each_translation(cli_setup, tmp_path):
    """prefix=true reads SOURCE<TAB>PREFIX, prefix_file=FILE the same prefixes: the same output, each line starting
    with its prefix; a prefix with no room under the output limit leaves its line empty, with an error naming it."""
    sources, prefixes = ["un chien", "le chat", "un homme", "une femme"], ["a dog ", "the ca", "", " ".join(["x"] * 80)]
    (tmp_path / "pairs.tsv").write_text("".join(f"{s}\t{p}\n" for s, p in zip(sources, prefixes)))
    (tmp_path / "src.txt").write_text("".join(f"{s}\n" for s in sources))
    (tmp_path / "prefixes.txt").write_text("".join(f"{p}\n" for p in prefixes))
    inline = _translate(cli_setup, f"input={tmp_path / 'pairs.tsv'}", "prefix=true")
    filed = _translate(cli_setup, f"input={tmp_path / 'src.txt'}", f"prefix_file={tmp_path / 'prefixes.txt'}")
    assert inline.returncode == filed.returncode == 0, inline.stderr.decode()[-2000:]
    lines = inline.stdout.decode().split("\n")
    assert lines == filed.stdout.decode().split("\n") and len(lines) == 5
    assert lines[0].startswith("a dog ") and lines[1].startswith("the ca") and lines[3] == ""
    assert "sentence 4: its prefix and constraints need" in inline.stderr.decode()
    (tmp_path / "short.txt").write_text("a dog\n")
    short = _translate(cli_setup, f"input={tmp_path / 'src.txt'}", f"prefix_file={tmp_path / 'short.txt'}")
    assert short.returncode == 2 and "prefix_file ends before line 2" in short.stderr.decode()


def test_alternatives_give_a_numbered_line_each(cli_setup, tmp_path):
    (tmp_path / "pairs.tsv").write_text("un chien\ta \nle chat\t\n")
    result = _translate(cli_setup, f"input={tmp_path / 'pairs.tsv'}", "prefix=true", "decoding.alternatives=3")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    rows = [line.split("\t") for line in result.stdout.decode().splitlines()]
    assert [r[0] for r in rows] == ["1"] * 3 + ["2"] * 3
    assert all(r[2].startswith("a ") for r in rows[:3]) and len({r[2] for r in rows[:3]}) == 3


def test_constraints_in_the_input_and_a_glossary_appear_in_each_translation(cli_setup, tmp_path):
    """constraints=true reads SOURCE<TAB>PHRASE...; decoding.glossary=FILE adds the terms whose source term is in the
    line; a line whose constraints are wrong is left empty with an error naming it, the others translated."""
    (tmp_path / "in.tsv").write_text("un chien\tdog\ta red cat\nle chat\nune femme\tman\tman\nun homme\n")
    (tmp_path / "glossary.tsv").write_text("# term\tdomain term\nchat\tkitten\nhom\tnever\n")
    args = ("decoding=beam", "decoding.precision=fp32", "constraints=true", f"input={tmp_path / 'in.tsv'}")
    result = _translate(cli_setup, *args, f"decoding.glossary={tmp_path / 'glossary.tsv'}")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    lines = result.stdout.decode().split("\n")
    assert "dog" in lines[0].split() and "a red cat" in lines[0] and "kitten" in lines[1].split()
    assert lines[2] == "" and "sentence 3: constraint 'man' is given twice" in result.stderr.decode()
    assert "never" not in lines[3].split()  # "hom" is not a whole word of "un homme"
