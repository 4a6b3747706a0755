"""Back-translation (`transformer-backtranslate`): selection, the output folder, resuming after a SIGKILL, refusals."""

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import WORDS_FR
from transformer.core.errors import UserError
from transformer.data.backtranslated import MANIFEST, check_corpus_folder
from transformer.decoding.chunks import chunk_seed
from transformer.recipe.backtranslation import SELECTION_RULES, select_sentences

BIN = Path(sys.executable).parent


@pytest.mark.parametrize("seed", range(20))
def test_selection_keeps_each_new_line_once_in_order(seed):
    choices = ["", " ", "un chien", "le chat", "un chien ", "val line", "rouge", " train line"]
    lines = random.Random(seed).choices(choices, k=random.Random(seed).randint(0, 30))
    counts: dict[str, int] = {}
    kept = list(select_sentences(lines, exclude={"val line"}, known={"train line"}, counts=counts))
    expected = list(dict.fromkeys(s.strip() for s in lines if s.strip() not in ("", "val line", "train line")))
    assert kept == expected
    assert counts["read"] == len(lines) == len(kept) + sum(counts[rule] for rule in SELECTION_RULES)
    assert counts["in training data"] == sum(s == " train line" for s in lines)


def test_chunk_seeds_differ_between_chunks_and_seeds():
    seeds = {chunk_seed(seed, chunk) for seed in range(3) for chunk in range(50)}
    assert len(seeds) == 150


def test_training_refuses_a_folder_of_the_other_direction_or_unfinished(tmp_path: Path):
    manifest = {"src_lang": "en", "tgt_lang": "fr", "complete": True}
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    check_corpus_folder(tmp_path, "en", "fr", "data.extra_train.bt.dir")
    with pytest.raises(UserError, match="back-translated en→fr corpus but this run trains fr→en"):
        check_corpus_folder(tmp_path, "fr", "en", "data.extra_train.bt.dir")
    (tmp_path / MANIFEST).write_text(json.dumps({**manifest, "complete": False}))
    with pytest.raises(UserError, match="unfinished"):
        check_corpus_folder(tmp_path, "en", "fr", "data.extra_train.bt.dir")


def monolingual(folder: Path, n: int, val: Path, train: Path) -> Path:
    """About n distinct French lines (longer than any val/test sentence), then repeats, blank lines, a val
    sentence and a training sentence."""
    rng = random.Random(5)
    lines = list(dict.fromkeys(" ".join(rng.choices(WORDS_FR, k=rng.randint(8, 10))) for _ in range(n)))
    known = [val.read_text().splitlines()[0], gzip.open(train, "rt").readline().strip()]
    path = folder / "mono.fr"
    path.write_text("\n".join([*lines, "", lines[0], "  ", *known, *lines[:3]]) + "\n")
    return path


def backtranslate(setup: dict, mono: Path, output: Path, *extra: str) -> subprocess.Popen:
    argv = [str(BIN / "transformer-backtranslate"), setup["ckpt"], f"input={mono}", f"output={output}"]
    argv += ["decoding=sample", "decoding.batch_size=8", "chunk_lines=12", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # a tiny model: threads only contend on a shared machine
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finished(process: subprocess.Popen) -> str:
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    return err


@pytest.mark.slow
def test_interrupted_backtranslation_ends_with_the_uninterrupted_files(cli_setup):
    tmp = Path(cli_setup["tmp"])
    mono = monolingual(tmp, 240, tmp / "val.fr", tmp / "train.fr.gz")
    whole = finished(backtranslate(cli_setup, mono, tmp / "bt_whole"))
    assert "sentences/s" in whole and "empty 2, eval overlap 1, in training data 1, duplicate 4;" in whole

    killed = backtranslate(cli_setup, mono, tmp / "bt_killed")
    chunks = tmp / "bt_killed" / "chunks"
    while killed.poll() is None and len(list(chunks.glob("*.tgt"))) < 3:
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    assert killed.returncode == -signal.SIGKILL
    assert not json.loads((tmp / "bt_killed" / MANIFEST).read_text())["complete"]
    assert "resuming at line " in finished(backtranslate(cli_setup, mono, tmp / "bt_killed"))

    for name in ("train.src", "train.tgt", MANIFEST):  # data=files: languages src→tgt, so a tgt→src corpus
        assert (tmp / "bt_killed" / name).read_bytes() == (tmp / "bt_whole" / name).read_bytes()
    manifest = json.loads((tmp / "bt_whole" / MANIFEST).read_text())
    originals = (tmp / "bt_whole" / "train.src").read_text().splitlines()
    assert (manifest["src_lang"], manifest["tgt_lang"], manifest["complete"]) == ("tgt", "src", True)
    assert manifest["lines"]["kept"] == len(originals) == len(set(originals))
    known = {(tmp / "val.fr").read_text().splitlines()[0], gzip.open(tmp / "train.fr.gz", "rt").readline().strip()}
    expected = dict.fromkeys(line.strip() for line in mono.read_text().splitlines())
    assert originals == [line for line in expected if line and line not in known]
    assert len((tmp / "bt_whole" / "train.tgt").read_text().splitlines()) == len(originals)
    assert not (tmp / "bt_whole" / "chunks").exists()


@pytest.mark.slow
def test_backtranslation_refusals_are_one_error_line(cli_setup):
    tmp = Path(cli_setup["tmp"])
    mono = monolingual(tmp, 30, tmp / "val.fr", tmp / "train.fr.gz")
    finished(backtranslate(cli_setup, mono, tmp / "bt_small"))
    prepare = [
        str(BIN / "transformer-prepare"),
        *cli_setup["data"].split(),
        f"+data.extra_train.bt.dir={tmp / 'bt_small'}",
    ]
    other_settings = backtranslate(cli_setup, mono, tmp / "bt_small", "decoding.seed=7")
    for process, words in (
        (subprocess.Popen(prepare, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), "trains src→tgt"),
        (other_settings, "other settings (decoding)"),
    ):
        _, err = process.communicate(timeout=300)
        assert process.returncode == 2 and "Traceback" not in err
        (line,) = [line for line in err.splitlines() if line.startswith("error:")]
        assert words in line
