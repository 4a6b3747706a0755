import gzip
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import training_pairs, write_corpus
from transformer.core.config import CleanConfig, DataConfig, SourceConfig
from transformer.core.errors import UserError
from transformer.core.special_ids import BOS_ID, EOS_ID, PAD_ID
from transformer.data.batching import TrainBatches, collate, token_batches
from transformer.data.corpus import evaluation_splits, split_names, split_source, text_source
from transformer.data.preparation import prepare


def files_config(corpus, tmp_path, clean: bool = False, **tokenizer) -> DataConfig:
    """The toy corpus as `data=files`; cleaning off unless `clean` (tests/data/test_cleaning.py tests it)."""
    cfg = DataConfig(
        name="toy",
        src_lang="fr",
        tgt_lang="en",
        prepared_dir=str(tmp_path / "prepared"),
        train=SourceConfig(*map(str, corpus["train"])),
        val=SourceConfig(*map(str, corpus["val"])),
        test={"test": dict(zip(("src", "tgt"), map(str, corpus["test"])))},
    )
    cfg.tokenizer.vocab_size = 60
    if not clean:
        cfg.clean = CleanConfig(max_ratio=0, duplicates=False, equal_sides=False, eval_overlap=False)
    for key, value in tokenizer.items():
        setattr(cfg.tokenizer, key, value)
    return cfg


def test_prepare_tokenizes_every_split_and_reuses_it(corpus, tmp_path, caplog):
    cfg = files_config(corpus, tmp_path)
    prepared = prepare(cfg)
    assert prepared.meta["pairs"] == {"train": 300, "val": 20, "test": 20}
    row = prepared.split("val")[0]
    assert prepared.tokenizer.decode_tgt([row["tgt_ids"]]) == [row["tgt"]]
    assert prepared.tokenizer.joint and prepared.tokenizer.src.pad_id() == PAD_ID
    assert (prepared.tokenizer.src.bos_id(), prepared.tokenizer.src.eos_id()) == (BOS_ID, EOS_ID)
    with caplog.at_level("INFO"):
        again = prepare(cfg)
    assert again.dir == prepared.dir and "reusing" in caplog.text


def test_extra_training_corpora_are_appended_to_the_training_split(corpus, tmp_path):
    extra = write_corpus(tmp_path, "extra", 50, seed=4)
    cfg = files_config(corpus, tmp_path)
    cfg.extra_train = {"more": {"src": str(extra[0]), "tgt": str(extra[1])}}
    prepared = prepare(cfg)
    assert prepared.meta["pairs"] == {"train": 350, "val": 20, "test": 20}
    assert training_pairs(prepared)[300][0] == extra[0].read_text().splitlines()[0]
    assert prepared.dir != prepare(files_config(corpus, tmp_path)).dir
    cfg.extra_train = {"more": {"src": str(tmp_path / "nope.fr"), "tgt": str(extra[1])}}
    with pytest.raises(UserError, match="missing corpus file .*nope.fr; check the data.extra_train"):
        prepare(cfg)


def test_both_directions_adds_every_corpus_the_other_way_round_untagged(corpus, tmp_path):
    val_fr, val_en = (path.read_text().splitlines()[0] for path in corpus["val"])
    extra = (write(tmp_path / "x.fr", b"un mot\n" + f"{val_fr}\n".encode()), write(tmp_path / "x.en", b"a word\nthe\n"))
    cfg = files_config(corpus, tmp_path, clean=True)
    cfg.extra_train = {"more": {"src": str(extra[0]), "tgt": str(extra[1]), "tag": "bt"}}
    one_way = prepare(cfg)
    cfg.both_directions = True
    prepared = prepare(cfg)
    assert prepared.dir != one_way.dir and prepared.tokenizer.joint
    names = [c["name"] for c in prepared.corpora]
    assert names == ["toy", "more", "toy-reversed", "more-reversed"] and prepared.corpora[3]["tag"] == ""
    kept = [c["pairs"] for c in one_way.corpora]
    assert [c["pairs"] for c in prepared.corpora] == kept + kept  # the val overlap dropped both ways (swapped sides)
    assert [c["cleaning"]["eval overlap"] for c in prepared.corpora][1::2] == [1, 1]
    train, pairs, first = prepared.split("train"), training_pairs(prepared), sum(kept)
    assert pairs[first] == training_pairs(one_way)[0][::-1]
    (bt,) = prepared.tokenizer.tag_prefix("bt")
    assert pairs[first + kept[0]][0] == "a word" and train[first + kept[0]]["src_ids"][0] != bt


def test_separate_vocabularies(corpus, tmp_path):
    prepared = prepare(files_config(corpus, tmp_path, joint=False, model_type="unigram"))
    assert not prepared.tokenizer.joint
    assert (prepared.dir / "spm.src.model").exists() and (prepared.dir / "spm.tgt.model").exists()


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def pairs(src, tgt, skipped=None) -> list[tuple[str, str]]:
    return list(text_source(src, tgt, "fr", "en", "data.train").pairs(skipped))


def test_mismatched_line_counts_are_an_error(tmp_path):
    with pytest.raises(UserError, match="has 3 lines but .* has 2"):
        pairs(write(tmp_path / "a.fr", b"un\ndeux\ntrois\n"), write(tmp_path / "a.en", b"one\ntwo\n"))
    with pytest.raises(UserError, match="has 1 lines but .* has 3"):
        pairs(write(tmp_path / "a.fr", b"un\n"), write(tmp_path / "a.en", b"one\ntwo\nthree\n"))


def test_invalid_utf8_names_file_and_line(tmp_path):
    with pytest.raises(UserError, match=r"b\.fr:2: not valid UTF-8"):
        pairs(write(tmp_path / "b.fr", b"un\n\xff\xfe\n"), write(tmp_path / "b.en", b"one\ntwo\n"))


def test_empty_lines_are_skipped_and_crlf_handled(tmp_path):
    src = write(tmp_path / "c.fr.gz", gzip.compress(b"un\r\n  \r\ntrois\r\n"))
    tgt = write(tmp_path / "c.en", b"one\r\ntwo\r\nthree\r\n")
    skipped = Counter()
    assert pairs(src, tgt, skipped) == [("un", "one"), ("trois", "three")]
    assert skipped == {"empty": 1}


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(UserError, match="missing corpus file"):
        pairs(tmp_path / "nope.fr", tmp_path / "nope.en")


def test_missing_split_names_the_available_ones():
    with pytest.raises(UserError, match=r"corpus 'multi30k' has no split 'test_2019'; its splits are \['train'"):
        split_source(DataConfig(name="multi30k", dir="data/multi30k", test_splits=["test_2016_flickr"]), "test_2019")


def test_token_batches_respect_the_budget_and_cover_every_example():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, size=(500, 2))
    batches = token_batches(lengths, 256, np.random.default_rng(1))
    for idx in batches:
        assert len(idx) * lengths[idx].max() <= 256 or len(idx) == 1
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    again = token_batches(lengths, 256, np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))


def test_collate_adds_specials_and_pads():
    batch = collate([[5, 6], [7]], [[8], [9, 10, 11]])
    assert batch.src.tolist() == [[5, 6, EOS_ID], [7, EOS_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 8, PAD_ID, PAD_ID], [BOS_ID, 9, 10, 11]]
    assert batch.tgt_out.tolist() == [[8, EOS_ID, PAD_ID, PAD_ID], [9, 10, 11, EOS_ID]]
    assert batch.n_tokens == 6


def test_an_edited_corpus_is_prepared_anew(corpus, tmp_path):
    cfg = files_config(corpus, tmp_path)
    first = prepare(cfg)
    val_src, val_tgt = corpus["val"]
    val_src.write_text("un chien\n" * 3)
    val_tgt.write_text("a dog\n" * 3)
    second = prepare(cfg)
    assert second.dir != first.dir and len(second.split("val")) == 3


def test_a_corpus_too_small_for_the_vocabulary_gets_a_smaller_one(corpus, tmp_path, caplog):
    with caplog.at_level("WARNING"):
        prepared = prepare(files_config(corpus, tmp_path, vocab_size=8000))
    assert prepared.tokenizer.src_vocab_size < 8000 and "vocabulary was lowered" in caplog.text


def test_a_failed_prepare_leaves_nothing_half_done(corpus, tmp_path):
    cfg = files_config(corpus, tmp_path)
    src, _ = corpus["val"]
    src.write_text("un\ndeux\n")  # now 2 lines against 20
    with pytest.raises(UserError, match="has 2 lines but"):
        prepare(cfg)
    assert [p.name for p in (tmp_path / "prepared").iterdir() if p.suffix != ".lock"] == []  # only the lock file
    assert corpus["train"][0].exists() and src.read_text() == "un\ndeux\n"  # inputs untouched


def test_what_a_killed_write_left_is_no_part_of_the_prepared_data_nor_of_its_size(corpus, tmp_path, caplog):
    cfg = files_config(corpus, tmp_path)
    first = prepare(cfg)
    meta, work = (first.dir / "meta.json").read_bytes(), first.dir.with_name(f".{first.dir.name}.partial")
    shutil.rmtree(first.dir)
    (work / "train" / "00-toy").mkdir(parents=True)
    (work / "train" / "00-toy" / ".shard-00000.arrow.123.tmp").write_bytes(b"\0" * 100_000)  # a killed write's
    with caplog.at_level("INFO"):
        again = prepare(cfg)
    assert "continuing the preparation" in caplog.text and (again.dir / "meta.json").read_bytes() == meta
    assert not [p for p in again.dir.rglob(".*")]


def test_subword_sampling_resegments_training_batches_reproducibly(corpus, tmp_path):
    cfg = files_config(corpus, tmp_path)
    cfg.subword_dropout = 0.3  # the training split keeps its text for it
    prepared = prepare(cfg)
    train = prepared.split("train")
    plain = TrainBatches.from_dataset(train, 128, 256, seed=3)
    sampled = TrainBatches.from_dataset(train, 128, 256, seed=3, sampling=(prepared.tokenizer, 0.3))
    batch = plain.epoch(0)[0]
    fixed = plain.collate(batch, epoch=0)
    first, again, later = (sampled.collate(batch, epoch=e) for e in (0, 0, 1))

    def text(b):
        return prepared.tokenizer.decode_tgt([[t for t in row if t > EOS_ID] for row in b.tgt_out.tolist()])

    assert text(first) == text(fixed)  # the same sentences
    assert first.n_tokens > fixed.n_tokens  # split into more pieces
    assert torch.equal(first.src, again.src) and torch.equal(first.tgt_out, again.tgt_out)  # a function of the seed
    assert not (torch.equal(first.src, later.src) and torch.equal(first.tgt_out, later.tgt_out))  # new each epoch
    assert torch.equal(plain.collate(batch, epoch=1).tgt_out, fixed.tgt_out)  # off: the prepared ids


def test_the_test_sets_are_the_builtin_test_splits_then_the_named_files():
    named = {"mine": {"src": "x.fr", "tgt": "x.en"}}
    builtin = DataConfig(name="multi30k", dir="d", test_splits=["test_2016_flickr", "test_2017_flickr"])
    files = DataConfig(name="files", train=SourceConfig("a", "b"), val=SourceConfig("c", "d"), test=named)
    both = DataConfig(name="multi30k", dir="d", test_splits=["test_2016_flickr"], test=named)
    assert evaluation_splits(builtin) == ["test_2016_flickr", "test_2017_flickr"]
    assert evaluation_splits(files) == ["mine"]
    assert evaluation_splits(both) == ["test_2016_flickr", "mine"]
    assert split_names(both) == ["train", "val", "test_2016_flickr", "mine"]
    assert split_source(both, "mine").files == (Path("x.fr"), Path("x.en"))
