"""Cleaning of the training corpora at prepare time: each rule drops exactly its pairs, and never a val or test pair."""

import dataclasses
import random
from pathlib import Path

import pytest

from tests.conftest import WORDS_EN, WORDS_FR, training_pairs
from transformer.core.config import CleanConfig, DataConfig, SourceConfig
from transformer.data.cleaning import RULES
from transformer.data.preparation import prepare

MAX_LEN = 12  # tokens with EOS; the test words are whole pieces of the vocabulary below


def sentence_pairs(n: int) -> list[tuple[str, str]]:
    """`n` distinct word-for-word pairs of 2 to 4 words, no two with the same source or target."""
    rng, pairs = random.Random(0), {}
    while len(pairs) < n:
        idx = [rng.randrange(len(WORDS_FR)) for _ in range(rng.randint(2, 4))]
        pairs[" ".join(WORDS_FR[i] for i in idx)] = " ".join(WORDS_EN[i] for i in idx)
    return list(pairs.items())


BASE, VAL, TEST = (lambda pairs: (pairs[:30], pairs[30:38], pairs[38:]))(sentence_pairs(46))
BAD = {  # rule -> the training pairs it must drop
    "empty": [("", "a dog")],
    "too long": [(" ".join(WORDS_FR[:7] * 2), " ".join(WORDS_EN[:7] * 2))],
    "ratio": [("chien", "a red dog runs in the park")],
    "duplicate": [BASE[3]],
    "equal sides": [("parc rouge", "parc rouge")],
    "eval overlap": [(VAL[2][0], "a cat"), ("le chat", TEST[5][1])],  # a val source, a test target
}
SWITCH = {"ratio": {"max_ratio": 0}, "duplicate": {"duplicates": False}, "equal sides": {"equal_sides": False}}
SWITCH["eval overlap"] = {"eval_overlap": False}


def write_pairs(directory: Path, name: str, pairs: list[tuple[str, str]]) -> SourceConfig:
    for side, lang in ((0, "fr"), (1, "en")):
        (directory / f"{name}.{lang}").write_text("".join(pair[side] + "\n" for pair in pairs))
    return SourceConfig(str(directory / f"{name}.fr"), str(directory / f"{name}.en"))


def config(tmp_path: Path, **clean) -> DataConfig:
    train = [*BASE[:10], *(pair for pairs in BAD.values() for pair in pairs), *BASE[10:]]
    val = [*VAL, VAL[0], ("parc", "parc")]  # a repeat and equal sides: val is never cleaned
    cfg = DataConfig(
        name="toy",
        prepared_dir=str(tmp_path / "prepared"),
        train=write_pairs(tmp_path, "train", train),
        val=write_pairs(tmp_path, "val", val),
        test={"t": vars(write_pairs(tmp_path, "test", TEST))},
        max_len=MAX_LEN,
        clean=CleanConfig(**clean),
    )
    cfg.tokenizer.vocab_size = 150
    return cfg


def test_each_rule_drops_exactly_its_pairs_and_is_reported(tmp_path, caplog):
    with caplog.at_level("INFO"):
        prepared = prepare(config(tmp_path))
    assert training_pairs(prepared) == BASE
    assert len(prepared.split("val")) == len(VAL) + 2 and len(prepared.split("t")) == len(TEST)
    counts = {rule: len(pairs) for rule, pairs in BAD.items()}
    assert prepared.corpora[0]["cleaning"] == {"read": len(BASE) + sum(counts.values()), **counts}
    report = ", ".join(f"{rule} {counts[rule]}" for rule in RULES)
    assert f"training corpus toy: kept {len(BASE)} of {len(BASE) + sum(counts.values())}: {report}" in caplog.text


@pytest.mark.parametrize("rule", list(SWITCH))
def test_a_rule_switched_off_keeps_its_pairs(tmp_path, rule):
    prepared = prepare(config(tmp_path, **SWITCH[rule]))
    kept = set(training_pairs(prepared))
    assert kept == set(BASE) | set(BAD[rule])
    assert prepared.corpora[0]["cleaning"][rule] == 0


def test_the_thresholds_are_part_of_the_prepared_data_s_name(tmp_path):
    cfg = config(tmp_path)
    default = prepare(cfg)
    assert prepare(dataclasses.replace(cfg, clean=CleanConfig(max_ratio=10))).dir != default.dir
    assert prepare(dataclasses.replace(cfg, max_len=MAX_LEN + 1)).dir != default.dir
    assert prepare(dataclasses.replace(cfg, clean=CleanConfig())).dir == default.dir
