"""Corpus mixtures: weights give each corpus its share of every epoch; tags mark a corpus's sources."""

import gzip
import lzma
import math
from collections import Counter

import datasets
import numpy as np
import pytest

from tests.conftest import training_pairs, write_corpus
from tests.data.test_batching import lengths_of
from tests.data.test_preparation import files_config
from transformer.core.errors import UserError
from transformer.data.batching import TrainBatches, token_batches
from transformer.data.mixture import TrainingCorpus
from transformer.data.preparation import prepare


def split_of(sizes: list[int], seed: int = 0) -> datasets.Dataset:
    """A tokenized training split of random lengths: the corpora of `sizes`, one after the other."""
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    src_len, tgt_len = rng.integers(1, 30, n), rng.integers(1, 30, n)
    return datasets.Dataset.from_dict(
        {
            "src_ids": [[5] * k for k in src_len],
            "tgt_ids": [[6] * k for k in tgt_len],
            "src_len": src_len.tolist(),
            "tgt_len": tgt_len.tolist(),
        }
    )


def mixed(sizes: list[int], weights: list[float], seed: int = 3) -> TrainBatches:
    corpora = [TrainingCorpus(f"c{i}", weight=w, pairs=n) for i, (n, w) in enumerate(zip(sizes, weights))]
    return TrainBatches.from_dataset(split_of(sizes), 128, 300, seed, corpora=corpora)


def seen(data: TrainBatches, epoch: int) -> Counter:
    """How often each kept pair is in the epoch's batches."""
    return Counter(np.concatenate(data.epoch(epoch)).tolist())


@pytest.mark.parametrize(
    "sizes, weights",
    [([40, 70], [1, 1]), ([40, 70], [2, 0.5]), ([55, 30, 20], [0.3, 3, 1.75]), ([90, 9], [0.25, 4])],
)
@pytest.mark.parametrize("epoch", [0, 5])
def test_each_corpus_gets_its_weight_s_share_of_an_epoch(sizes, weights, epoch):
    data = mixed(sizes, weights)
    counts = seen(data, epoch)
    starts = np.cumsum([0, *sizes])
    for i, (size, weight) in enumerate(zip(sizes, weights)):
        whole, share = math.floor(weight), weight - math.floor(weight)
        times = [counts[p] for p in range(starts[i], starts[i + 1])]
        assert sum(times) == whole * size + round(share * size)  # counted, pair by pair
        assert set(times) <= {whole, whole + 1}  # every pair floor(w) times, a sample of them once more
    expected = {f"c{i}": sum(counts[p] for p in range(starts[i], starts[i + 1])) for i in range(len(sizes))}
    assert data.pairs_per_corpus(data.epoch(epoch)) == expected


def test_a_share_below_one_is_sampled_anew_each_epoch_and_again_the_same_after_a_resume():
    data = mixed([200, 50], [0.5, 1])
    first, second = (set(seen(data, e)) for e in (0, 1))
    assert len(first) == len(second) == 100 + 50 and first != second
    resumed = mixed([200, 50], [0.5, 1])  # what a resumed run builds: the same epochs, batch for batch
    for epoch in (0, 1, 7):
        assert all(np.array_equal(a, b) for a, b in zip(data.epoch(epoch), resumed.epoch(epoch)))
    assert set(seen(mixed([200, 50], [0.5, 1], seed=4), 0)) != first  # another seed, another sample


def test_weights_of_one_give_the_batches_of_a_split_without_a_mixture():
    data = mixed([60, 40, 25], [1, 1, 1])
    plain = TrainBatches.from_dataset(split_of([60, 40, 25]), 128, 300, seed=3)
    for epoch in range(3):
        expected = token_batches(lengths_of(plain), 300, np.random.default_rng([3, epoch]))
        for batches in (data.epoch(epoch), plain.epoch(epoch)):
            assert len(batches) == len(expected) and all(np.array_equal(a, b) for a, b in zip(batches, expected))


def tagged_setup(corpus, tmp_path, tag: str = "bt", weight: float = 1.0):
    written = tmp_path / "extra.fr", tmp_path / "extra.en"
    extra = written if written[0].exists() else write_corpus(tmp_path, "extra", 60, seed=4)
    cfg = files_config(corpus, tmp_path)
    cfg.extra_train = {"synthetic": {"src": str(extra[0]), "tgt": str(extra[1]), "tag": tag, "weight": weight}}
    return cfg, extra


def test_a_tag_is_one_reserved_piece_at_the_start_of_its_corpus_s_sources(corpus, tmp_path):
    cfg, extra = tagged_setup(corpus, tmp_path)
    prepared = prepare(cfg)
    tokenizer, train = prepared.tokenizer, prepared.split("train")
    assert tokenizer.tags == ("bt",) and [c["pairs"] for c in prepared.corpora] == [300, 60]
    (tag_id,) = tokenizer.tag_prefix("bt")
    assert tokenizer.src.id_to_piece(tag_id) == "<bt>"
    texts = training_pairs(prepared)
    for i, row in enumerate(train.select(range(300, 360))):  # the tagged corpus: its tag, then its own pieces
        assert row["src_ids"] == [tag_id, *tokenizer.encode_src([texts[300 + i][0]])[0]]
        assert row["src_len"] == len(row["src_ids"])
    untagged = [*train.select(range(300))["src_ids"], *prepared.split("val")["src_ids"], *train["tgt_ids"]]
    assert all(tag_id not in ids for ids in untagged)


def test_text_that_spells_a_tag_never_becomes_the_tag(corpus, tmp_path):
    cfg, (src, tgt) = tagged_setup(corpus, tmp_path)
    for path, line in ((src, "le chat <dort>\n"), (tgt, "the cat <sleeps>\n")):  # "<" and ">" get their pieces
        path.write_text(path.read_text() + line)
    tokenizer = prepare(cfg).tokenizer
    (tag_id,) = tokenizer.tag_prefix("bt")
    text = "un <bt> chien<bt>"
    for ids in (tokenizer.encode_src([text])[0], tokenizer.encode_tgt([text])[0]):
        assert tag_id not in ids and tokenizer.decode_tgt([ids]) == [text]
    assert tokenizer.encode_src([text], "bt")[0] == [tag_id, *tokenizer.encode_src([text])[0]]
    with pytest.raises(UserError, match="tag 'news' is not in this model's vocabulary \\(its tags: bt\\)"):
        tokenizer.encode_src([text], "news")


def test_bpe_dropout_keeps_the_tag_first(corpus, tmp_path):
    cfg, _ = tagged_setup(corpus, tmp_path)
    cfg.subword_dropout = 0.3
    prepared = prepare(cfg)
    corpora = prepared.mixture(cfg)
    sampled = TrainBatches.from_dataset(
        prepared.split("train"), 128, 100_000, 3, (prepared.tokenizer, 0.3), corpora
    )  # one batch: every pair
    batch = sampled.collate(sampled.epoch(0)[0], epoch=0)
    first = batch.src[:, 0].tolist()
    owner = sampled.corpus_of(sampled.epoch(0)[0])
    (tag_id,) = prepared.tokenizer.tag_prefix("bt")
    assert [t == tag_id for t in first] == [o == 1 for o in owner]
    assert int((batch.src == tag_id).sum()) == 60  # and nowhere else


def test_weights_are_no_part_of_the_prepared_data_but_tags_are(corpus, tmp_path):
    base = prepare(tagged_setup(corpus, tmp_path)[0])
    reweighted = prepare(tagged_setup(corpus, tmp_path, weight=3.0)[0])
    retagged = prepare(tagged_setup(corpus, tmp_path, tag="synth")[0])
    assert reweighted.dir == base.dir and retagged.dir != base.dir
    assert retagged.tokenizer.tags == ("synth",)
    cfg, _ = tagged_setup(corpus, tmp_path, weight=3.0)
    assert [(c.name, c.pairs, c.weight, c.tag) for c in base.mixture(cfg)] == [
        ("toy", 300, 1.0, ""),
        ("synthetic", 60, 3.0, "bt"),
    ]


def test_an_extra_corpus_can_be_a_folder_of_plain_or_compressed_files(corpus, tmp_path):
    folder = tmp_path / "bt"
    folder.mkdir()
    src, tgt = write_corpus(tmp_path, "made", 40, seed=5)
    (folder / "train.fr.gz").write_bytes(gzip.compress(src.read_bytes()))
    (folder / "train.en").write_bytes(tgt.read_bytes())
    cfg = files_config(corpus, tmp_path)
    cfg.extra_train = {"bt": {"dir": str(folder), "tag": "bt", "weight": 0.5}}
    prepared = prepare(cfg)
    assert training_pairs(prepared)[300][0] == src.read_text().splitlines()[0]
    assert [c["pairs"] for c in prepared.corpora] == [300, 40]
    (folder / "train.en.xz").write_bytes(lzma.compress(tgt.read_bytes()))
    with pytest.raises(UserError, match="holds train.en and train.en.xz; it needs exactly one"):
        prepare(cfg)
    cfg.extra_train = {"bt": {"dir": str(tmp_path / "nowhere")}}
    with pytest.raises(UserError, match="holds none of train.fr, train.fr.gz, train.fr.xz"):
        prepare(cfg)


def test_a_mixture_trains_with_its_per_corpus_counts_logged(corpus, tmp_path, caplog):
    from tests.training.test_training import make_trainer, scalars, toy_overrides

    extra = write_corpus(tmp_path, "extra", 80, seed=4)
    overrides = [
        *toy_overrides(corpus, tmp_path),
        f"+data.extra_train.synthetic.src={extra[0]}",
        f"+data.extra_train.synthetic.tgt={extra[1]}",
        "+data.extra_train.synthetic.weight=0.5",
        "+data.extra_train.synthetic.tag=bt",
        "data.weight=2",
        "trainer.max_steps=2",
        "decoding.tag=bt",  # validation translates as the tagged corpus
    ]
    with caplog.at_level("INFO"):
        trainer = make_trainer(overrides, tmp_path / "run")
        trainer.fit()
    main, synthetic = (c.pairs for c in trainer.train_data.corpora)
    logged = f"pairs files {2 * main:,}, synthetic {round(0.5 * synthetic):,}"
    assert logged in caplog.text and "training corpus synthetic: kept" in caplog.text
    assert scalars(tmp_path / "run", "pairs_per_epoch/synthetic") == [(0, round(0.5 * synthetic))]
    assert all(ids[0] == trainer.tokenizer.tag_prefix("bt")[0] for ids in trainer.validator.src_ids)
