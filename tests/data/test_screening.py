"""Screening, the first pass of `transformer-prepare`: its sample and its repeats do not depend on how the corpus is
cut into shards or slices, and a restart picks up the sampled pairs' text from the finished shards."""

from collections import Counter

import numpy as np

from tests.conftest import write_corpus
from tests.data.test_preparation import files_config
from transformer.core.config import CleanConfig
from transformer.data import screening
from transformer.data.cleaning import CleaningReport
from transformer.data.preparation import prepare
from transformer.data.screening import Sample, Screen
from transformer.data.sources.base import PairReader


def pairs_of(n: int, repeat_every: int = 5) -> list[tuple[str, str]]:
    """`n` pairs, every `repeat_every`-th a repeat of the pair before it."""
    pairs = []
    for i in range(n):
        pairs.append(pairs[-1] if i % repeat_every == repeat_every - 1 else (f"phrase {i}", f"sentence {i}"))
    return pairs


def screened(tmp_path, pairs, shard_pairs: int, k: int, interrupted_after: int | None = None) -> tuple[Sample, list]:
    """Screen `pairs` into a sample of `k` (optionally killed after `interrupted_after` shards and run again)."""
    folder = tmp_path / f"s{shard_pairs}-{interrupted_after}"
    if interrupted_after is not None:
        first = Screen(folder, shard_pairs, 0)
        for shard in range(interrupted_after):
            first._shard(reader(pairs[shard * shard_pairs :]), shard, (set(), set()), Sample(k), _Bar())
    sample = Sample(k)
    Screen(folder, shard_pairs, 0).run(reader(pairs), Counter(), (set(), set()), "toy", sample)
    report = CleaningReport(len(pairs))
    Screen(folder, shard_pairs, 0).keep(CleanConfig(), report)
    kept = [Screen(folder, shard_pairs, 0).kept(s) for s in range(-(-len(pairs) // shard_pairs))]
    return sample, [report.dropped, np.concatenate(kept).tolist()]


def reader(pairs: list[tuple[str, str]]) -> PairReader:
    """The pairs as a source gives them, in chunks of 13."""
    return PairReader(tuple(map(list, zip(*pairs[i : i + 13]))) for i in range(0, len(pairs), 13))


class _Bar:
    def update(self, n: int = 1) -> None:
        pass


def test_the_sample_and_the_repeats_do_not_depend_on_the_shards(tmp_path, monkeypatch):
    pairs = pairs_of(200)
    one, flags = screened(tmp_path, pairs, 1000, k=30)
    expected = list(zip(*one.drained()))  # drained: read once
    monkeypatch.setattr(screening, "SLICE", 17)  # repeats found in several slices of fingerprints
    for shard_pairs in (7, 50):
        other, other_flags = screened(tmp_path, pairs, shard_pairs, k=30)
        assert list(zip(*other.drained())) == expected
        assert other_flags == flags
    assert flags[0]["duplicate"] == 40 and flags[1].count(False) == 40


def test_a_restart_reads_the_sampled_text_of_the_finished_shards_again(tmp_path):
    pairs = pairs_of(120)
    whole, _ = screened(tmp_path, pairs, 25, k=20)
    resumed, _ = screened(tmp_path, pairs, 25, k=20, interrupted_after=3)
    sampled = list(zip(*resumed.drained()))
    assert sampled == list(zip(*whole.drained())) and len(sampled) == 20 and all(s and t for s, t in sampled)
    assert set(sampled) <= set(pairs)


def test_prepared_data_does_not_depend_on_the_shard_size(corpus, tmp_path):
    extra = write_corpus(tmp_path, "extra", 40, seed=4)
    folders = []
    for shard_pairs in (1_000_000, 23):
        cfg = files_config(corpus, tmp_path)
        cfg.extra_train = {"more": {"src": str(extra[0]), "tgt": str(extra[1]), "tag": "bt"}}
        cfg.shard_pairs, cfg.prepared_dir = shard_pairs, str(tmp_path / f"prepared{shard_pairs}")
        prepared = prepare(cfg)
        folders.append((prepared.dir / "spm.model").read_bytes())
        folders.append(prepared.split("train")["src_ids"])
    assert folders[0] == folders[2] and folders[1] == folders[3]


def test_texts_keep_and_drain_the_sentences_a_list_would():
    rng = np.random.default_rng(0)
    words = ["été", "naïve", "", "le chat", "Œuvre d'art", "x" * 300, "日本"]
    blocks = [[words[i] for i in rng.integers(0, len(words), n)] for n in (5, 1, 12, 7)]
    texts, expected = screening.Texts(), [s for block in blocks for s in block]
    for block in blocks:
        texts.add([s.encode() for s in block])
    for _ in range(3):
        mask = rng.random(len(expected)) < 0.7
        texts.keep(mask)
        expected = [s for s, m in zip(expected, mask) if m]
        assert len(texts) == len(expected)
    assert list(texts.drain()) == expected and len(texts) == 0
