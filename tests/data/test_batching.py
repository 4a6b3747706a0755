"""Training batches without Python per pair: the epoch's order and cuts, and ids gathered from Arrow's buffers."""

import datasets
import numpy as np
import pytest
import torch

from transformer.data.batch_order import KeyLayout, token_batches
from transformer.data.batching import TrainBatches, collate, pad
from transformer.data.mixture import TrainingCorpus


def pairs(n: int, seed: int = 0, longest: int = 40) -> dict[str, list[list[int]]]:
    rng = np.random.default_rng(seed)
    src, tgt = rng.integers(0, longest, n), rng.integers(1, longest, n)  # an empty source is allowed
    return {
        "src_ids": [rng.integers(4, 60_000, k).tolist() for k in src],
        "tgt_ids": [rng.integers(4, 60_000, k).tolist() for k in tgt],
    }


def chunked(sizes: list[int], dtype: str = "uint16", seed: int = 0) -> datasets.Dataset:
    """A split of random ids of `dtype` in one Arrow chunk per size, as a concatenation of shards gives."""
    features = datasets.Features({name: datasets.List(datasets.Value(dtype)) for name in ("src_ids", "tgt_ids")})
    parts = [datasets.Dataset.from_dict(pairs(n, seed + i), features=features) for i, n in enumerate(sizes)]
    return datasets.concatenate_datasets(parts)


def per_row(ds: datasets.Dataset, rows: list[int]):
    """The batch of `rows` the way it was built before: lists read row by row, padded in a loop."""
    return collate([ds[r]["src_ids"] for r in rows], [ds[r]["tgt_ids"] for r in rows])


def same(a, b) -> bool:
    return all(torch.equal(getattr(a, f), getattr(b, f)) for f in ("src", "tgt_in", "tgt_out"))


def lengths_of(data: TrainBatches) -> np.ndarray:
    """(N, 2) lengths (with EOS/BOS) of the kept pairs, read back from their length classes."""
    return np.stack(data.layout.lengths(data.classes), axis=1)


@pytest.mark.parametrize("dtype", ["uint16", "int64", "int32"])
def test_the_gathered_batch_equals_the_per_row_batch_over_several_chunks(dtype):
    ds = chunked([30, 1, 45, 24], dtype)
    data = TrainBatches.from_dataset(ds, 128, 200, seed=1)
    assert data.classes.dtype == np.uint32 and data.rows is None  # 4 bytes a pair
    assert len({v for v in data.ids[0].value_view.tolist()}) == 4  # four allocations: four views
    rng = np.random.default_rng(2)
    for indices in [*data.epoch(0)[:5], rng.permutation(100)[:17], np.array([99, 0, 30, 31, 30])]:
        assert same(data.collate(indices, 0), per_row(ds, indices.tolist()))


def test_the_gathered_batch_reads_memory_mapped_shards_and_sliced_chunks(tmp_path):
    chunked([300, 200], "uint16").save_to_disk(str(tmp_path / "split"), max_shard_size="8KB")
    ds = datasets.load_from_disk(str(tmp_path / "split"))
    assert ds.data.column("src_ids").num_chunks > 2 and len(ds.cache_files) > 2
    sliced = ds.select(range(7, 450))  # contiguous: a slice of the table, its first chunk starts at an offset
    for split in (ds, sliced, ds.select([5, 3, 400, 2])):  # the last has an indices mapping, written out first
        data = TrainBatches.from_dataset(split, 128, 300, seed=1)
        for indices in data.epoch(0):
            assert same(data.collate(indices, 0), per_row(split, indices.tolist()))
    views = {v for v in TrainBatches.from_dataset(ds, 128, 300, seed=1).ids[0].value_view.tolist()}
    assert len(views) == len(ds.cache_files)  # one numpy view per file, whatever its number of record batches


def test_pairs_over_max_len_are_dropped_and_the_rest_read_at_their_rows():
    ds = chunked([40, 40])
    data = TrainBatches.from_dataset(ds, 20, 100, seed=1)
    lengths = np.array([[len(s) + 1, len(t) + 1] for s, t in zip(ds["src_ids"], ds["tgt_ids"])])
    kept = np.flatnonzero(lengths.max(axis=1) <= 20)
    assert 0 < len(kept) < 80 and data.rows.tolist() == kept.tolist()
    assert np.array_equal(lengths_of(data), lengths[kept])
    for indices in data.epoch(0):
        assert same(data.collate(indices, 0), per_row(ds, data.rows[indices].tolist()))


def test_an_epoch_covers_every_pair_once_within_the_budget_and_depends_on_seed_and_epoch():
    data = TrainBatches.from_dataset(chunked([150, 150]), 128, 256, seed=3)
    lengths = lengths_of(data).astype(np.int64)
    first = data.epoch(0)
    assert sorted(np.concatenate(list(first)).tolist()) == list(range(300))
    for indices in first:
        assert len(indices) * lengths[indices].max() <= 256 or len(indices) == 1
    again = TrainBatches.from_dataset(chunked([150, 150]), 128, 256, seed=3).epoch(0)  # a resumed run's
    assert len(again) == len(first) and all(np.array_equal(a, b) for a, b in zip(first, again))
    other_seed = TrainBatches.from_dataset(chunked([150, 150]), 128, 256, seed=4).epoch(0)
    for other in (data.epoch(1), other_seed):
        assert [a.tolist() for a in first] != [b.tolist() for b in other]


def test_the_cuts_are_the_greedy_rule_applied_pair_by_pair():
    rng = np.random.default_rng(5)
    lengths = np.concatenate([rng.integers(1, 60, (2000, 2)), [[300, 2], [1, 290]]])  # two wider than the budget
    batches = token_batches(lengths, 256, rng)
    widths = lengths[batches.order].max(axis=1)
    assert np.all(np.diff(widths) >= 0)  # sorted by the wider side
    bounds, start, widest = [0], 0, 0  # the rule of the loop this replaces, over the same order
    for i, width in enumerate(widths):
        widest = max(widest, width)
        if (i + 1 - start) * widest > 256 and i > start:
            bounds.append(i)
            start, widest = i, width
    assert batches.bounds.tolist() == [*bounds, len(widths)]
    assert sorted(batches.schedule.tolist()) == list(range(len(bounds)))


def test_padding_fraction_counts_each_batch_at_its_longest_sides():
    rng = np.random.default_rng(6)
    lengths = rng.integers(1, 50, (3000, 2))
    batches = token_batches(lengths, 500, rng)
    real = padded = 0
    for indices in batches:
        real += lengths[indices].sum()
        padded += len(indices) * lengths[indices].max(axis=0).sum()
    assert batches.padding_fraction() == pytest.approx(1 - real / padded)
    stretch = batches[4:9]
    assert len(stretch) == 5 and all(np.array_equal(a, b) for a, b in zip(stretch, list(batches)[4:9]))


def test_key_halves_give_back_the_lengths_and_positions():
    lengths = np.array([[1, 1], [7, 1], [1, 7], [7, 7], [3, 6], [6, 3]])
    for random in (False, True):
        layout = KeyLayout.of(lengths, random)
        high = layout.classes(lengths)
        layout.add_random_bits(high, np.random.default_rng(0))
        assert np.array_equal(np.stack(layout.lengths(high), axis=1), lengths)
    batches = token_batches(lengths, 1000, None)  # by width, then target minus source, then position
    assert batches.order.tolist() == [0, 5, 4, 1, 3, 2]
    assert batches[0].tolist() == [0, 1, 2, 3, 4, 5]  # a batch gives its positions ascending


def test_weights_give_each_corpus_its_share_without_a_per_pair_table():
    ds = chunked([40, 70])
    corpora = [TrainingCorpus("a", weight=2.0, pairs=40), TrainingCorpus("b", weight=0.5, pairs=70)]
    data = TrainBatches.from_dataset(ds, 128, 300, seed=3, corpora=corpora)
    counts = np.bincount(np.concatenate(list(data.epoch(0))), minlength=110)
    assert set(counts[:40].tolist()) == {2} and sorted(set(counts[40:].tolist())) == [0, 1]
    assert data.pairs_per_corpus(data.epoch(0)) == {"a": 80, "b": 35}
    assert data.corpus_of(np.array([0, 39, 40, 109])).tolist() == [0, 0, 1, 1]


def test_pad_and_collate_of_lists_are_right_padded():
    assert pad([[1, 2, 3], [4], []]).tolist() == [[1, 2, 3], [4, 0, 0], [0, 0, 0]]
    batch = collate([[5], []], [[], [8, 9]])
    assert batch.src.tolist() == [[5, 2], [2, 0]]
    assert batch.tgt_in.tolist() == [[1, 0, 0], [1, 8, 9]] and batch.tgt_out.tolist() == [[2, 0, 0], [8, 9, 2]]


def test_the_loader_can_be_timed_alone():
    seconds, tokens = TrainBatches.from_dataset(chunked([60]), 128, 200, seed=1).time_collate(3)
    assert seconds > 0 and tokens > 0
