"""scripts/unseen_words.py: unseen-word shares and BLEU split by whether a sentence has an unseen source word."""

import gzip
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "unseen_words.py"


def write_gz(path: Path, lines: list[str]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def run(*args: str) -> list[list[str]]:
    """The table's rows, as lists of cells."""
    done = script(*args)
    assert done.returncode == 0, done.stderr
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in done.stdout.splitlines()[2:]]


def cat_corpus(folder: Path, test_sentences: int) -> None:
    """A one-pair training corpus and a test set that repeats it."""
    write_gz(folder / "train.fr.gz", ["un chat"])
    write_gz(folder / "train.en.gz", ["a cat"])
    write_gz(folder / "test.fr.gz", ["un chat"] * test_sentences)
    write_gz(folder / "test.en.gz", ["a cat"] * test_sentences)


def test_shares_and_split_bleu(tmp_path):
    write_gz(tmp_path / "train.fr.gz", ["un chat noir", "un chien"])
    write_gz(tmp_path / "train.en.gz", ["a black cat", "a dog"])
    write_gz(tmp_path / "test.fr.gz", ["un chat", "un renard noir"])  # 1 of 5 words unseen, in the second sentence
    write_gz(tmp_path / "test.en.gz", ["a small cat sits here", "a red fox runs there"])
    (tmp_path / "syn").mkdir()
    (tmp_path / "syn" / "train.fr").write_text("un chat\n", encoding="utf-8")
    (tmp_path / "syn" / "train.en").write_text("a small red fox sits\n", encoding="utf-8")
    hyps = tmp_path / "test.hyp"
    hyps.write_text("a small cat sits here\nsomething else entirely\n", encoding="utf-8")
    [row] = run(
        "--corpus",
        str(tmp_path),
        "--synthetic",
        str(tmp_path / "syn"),
        "--splits",
        "test",
        "--hyps",
        f"sys={tmp_path}/{{split}}.hyp",
    )
    assert row[:3] == ["test", "2", "2.5"]
    assert row[3] == "20.00 (20.00)"  # the synthetic French adds no word
    assert row[4] == "70.00 (30.00)"  # small sits here red fox runs there unseen; the synthetic side adds 4
    assert row[5] == "50.0"
    seen, unseen = (float(x) for x in row[6].split(" / "))
    assert seen == 100.0 and unseen == 0.0


def test_hypotheses_of_another_length_are_refused(tmp_path):
    cat_corpus(tmp_path, test_sentences=2)
    (tmp_path / "test.hyp").write_text("a cat\n", encoding="utf-8")
    done = script("--corpus", str(tmp_path), "--splits", "test", "--hyps", f"sys={tmp_path}/{{split}}.hyp")
    assert done.returncode != 0 and "1 hypotheses for 2 references" in done.stderr


def test_a_missing_hypotheses_file_is_one_error_line(tmp_path):
    cat_corpus(tmp_path, test_sentences=1)
    done = script("--corpus", str(tmp_path), "--splits", "test", "--hyps", f"sys={tmp_path}/{{split}}.missing.hyp")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"error: missing corpus file {tmp_path}/test.missing.hyp"


def test_a_hypotheses_spec_without_a_label_is_refused(tmp_path):
    done = script("--corpus", str(tmp_path), "--hyps", "x.hyp")
    assert done.returncode == 2 and "give LABEL=PATTERN" in done.stderr


def test_bleu_by_source_length_with_the_gain_over_the_first_hypotheses(tmp_path):
    write_gz(tmp_path / "train.fr.gz", ["un chat"])
    write_gz(tmp_path / "train.en.gz", ["a cat"])
    write_gz(tmp_path / "test.fr.gz", ["un chat", "un grand chat noir dort"])  # 2 and 5 words
    write_gz(tmp_path / "test.en.gz", ["a small cat sits here", "a big black cat sleeps on the mat"])
    (tmp_path / "test.base.hyp").write_text("a small cat sits here\nnothing like it\n", encoding="utf-8")
    (tmp_path / "test.new.hyp").write_text(
        "a small cat sits here\na big black cat sleeps on the mat\n", encoding="utf-8"
    )
    done = script(
        "--corpus",
        str(tmp_path),
        "--splits",
        "test",
        "--hyps",
        f"base={tmp_path}/{{split}}.base.hyp",
        f"new={tmp_path}/{{split}}.new.hyp",
        "--lengths",
        "3",
    )
    assert done.returncode == 0, done.stderr
    second = done.stdout.split("\n\n")[1].splitlines()
    assert (
        second[0] == "| split | fr words | sentences | base BLEU (length ratio) | new BLEU (length ratio) | gain new |"
    )
    short, long = ([cell.strip() for cell in row.strip("|").split("|")] for row in second[2:])
    assert short == ["test", "0-2", "1", "100.00 (1.000)", "100.00 (1.000)", "+0.00"]
    assert long[:3] == ["test", "3+", "1"] and long[4:] == ["100.00 (1.000)", "+100.00"]
    assert long[3].startswith("0.00 (0.375)")  # 3 words for 8


def test_lengths_without_hypotheses_are_refused(tmp_path):
    done = script("--corpus", str(tmp_path), "--lengths", "10")
    assert done.returncode == 2 and "give --hyps too" in done.stderr
