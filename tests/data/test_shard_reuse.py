"""A change of the training corpora re-prepares only the corpora it touches (`data.shard_reuse`): the others'
shards are linked from the prepared folder that holds them, never screened or tokenized again."""

import shutil
from pathlib import Path

import pytest

from tests.conftest import write_corpus
from tests.data.test_preparation import files_config
from transformer.data import preparation as data
from transformer.data.preparation import prepare
from transformer.data.shards import shard_paths


def contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def work(monkeypatch) -> dict[str, list[str]]:
    """The corpora screened and those tokenized, by name, in order."""
    seen: dict[str, list[str]] = {"screened": [], "tokenized": []}
    screen, binarize = data._screen, data.binarize

    def screening(cfg, corpus, *args):
        seen["screened"].append(corpus.name)
        return screen(cfg, corpus, *args)

    def tokenizing(*args):
        seen["tokenized"].append(args[-1])
        return binarize(*args)

    monkeypatch.setattr(data, "_screen", screening)
    monkeypatch.setattr(data, "binarize", tokenizing)
    return seen


def with_extra(cfg, extra: tuple[Path, Path], **settings):
    cfg.extra_train = {"more": {"src": str(extra[0]), "tgt": str(extra[1]), **settings}}
    return cfg


def test_with_a_given_tokenizer_only_an_added_corpus_is_screened_and_tokenized(corpus, tmp_path, work, caplog):
    first = prepare(files_config(corpus, tmp_path, clean=True))
    extra = write_corpus(tmp_path, "extra", 50, seed=4)
    cfg = with_extra(files_config(corpus, tmp_path, clean=True), extra)
    work["screened"].clear(), work["tokenized"].clear()
    with caplog.at_level("INFO"):
        second = prepare(cfg, first.tokenizer)
    assert work == {"screened": ["more"], "tokenized": ["more"]}
    assert f"reused corpus toy from {first.dir}" in caplog.text
    old, new = (shard_paths(p.dir / "train" / "00-toy") for p in (first, second))
    assert [p.name for p in new] == [p.name for p in old] and new
    assert all(a.stat().st_ino == b.stat().st_ino for a, b in zip(old, new))  # hard links, not copies
    assert second.corpora[0] == first.corpora[0]  # its cleaning counts too
    fresh = prepare(with_extra(files_config(corpus, tmp_path / "elsewhere", clean=True), extra), first.tokenizer)
    assert fresh.dir.name == second.dir.name and contents(fresh.dir) == contents(second.dir)  # as prepared anew
    shutil.rmtree(first.dir)  # the folder it reused from may go: its own links stay
    assert len(data.PreparedData(second.dir).split("train")) == second.meta["pairs"]["train"]


def test_a_weight_change_reuses_the_whole_folder(corpus, tmp_path, work, caplog):
    extra = write_corpus(tmp_path, "extra", 50, seed=4)
    first = prepare(with_extra(files_config(corpus, tmp_path), extra))
    cfg = with_extra(files_config(corpus, tmp_path), extra, weight=3.0)
    cfg.weight = 0.5
    work["screened"].clear(), work["tokenized"].clear()
    with caplog.at_level("INFO"):
        second = prepare(cfg)
    assert second.dir == first.dir and "reusing prepared data" in caplog.text
    assert work == {"screened": [], "tokenized": []}
    assert [c.weight for c in second.mixture(cfg)] == [0.5, 3.0]


def test_another_tag_is_written_into_the_shards_without_tokenizing(corpus, tmp_path, work, caplog):
    """With a given tokenizer holding both tags, a corpus's shards are rewritten with the new tag's id: exactly what
    tokenizing them anew gives."""
    extra = write_corpus(tmp_path, "extra", 50, seed=4)
    cfg = with_extra(files_config(corpus, tmp_path, clean=True), extra, tag="bt")
    cfg.tag = "news"
    first = prepare(cfg)
    cfg.extra_train["more"]["tag"] = "news"
    work["screened"].clear(), work["tokenized"].clear()
    with caplog.at_level("INFO"):
        second = prepare(cfg, first.tokenizer)
    assert work == {"screened": [], "tokenized": []}
    assert f"reused corpus more from {first.dir}, retagged from <bt>" in caplog.text
    assert f"reused corpus toy from {first.dir}\n" in caplog.text
    (news,) = first.tokenizer.tag_prefix("news")
    assert {ids[0] for ids in second.split("train")["src_ids"]} == {news}
    fresh_cfg = with_extra(files_config(corpus, tmp_path / "elsewhere", clean=True), extra, tag="news")
    fresh_cfg.tag = "news"
    fresh = prepare(fresh_cfg, first.tokenizer)
    assert fresh.dir.name == second.dir.name and contents(fresh.dir) == contents(second.dir)


def test_a_tag_added_or_removed_tokenizes_that_corpus_alone(corpus, tmp_path, work, caplog):
    """A tag is the source's first token and counts in the token rules, so a corpus that gains or loses one is
    tokenized again (with a given tokenizer that holds the tag); the main corpus is linked."""
    extra = write_corpus(tmp_path, "extra", 50, seed=4)
    first = prepare(with_extra(files_config(corpus, tmp_path), extra, tag="bt"))
    cfg = with_extra(files_config(corpus, tmp_path), extra, tag="bt")
    given = prepare(cfg, first.tokenizer)
    assert given.dir == first.dir  # its own tokenizer: the same folder
    work["screened"].clear(), work["tokenized"].clear()
    cfg.tag, cfg.extra_train["more"]["tag"] = "", ""
    with caplog.at_level("INFO"):
        second = prepare(cfg, first.tokenizer)
    assert work == {"screened": ["more"], "tokenized": ["more"]}
    assert "reused corpus toy from" in caplog.text
    (bt,) = first.tokenizer.tag_prefix("bt")
    more = second.split("train").select(range(300, 350))
    assert bt not in {ids[0] for ids in more["src_ids"]}


def test_a_corpus_added_when_prepare_trains_the_tokenizer_tokenizes_everything(corpus, tmp_path, work):
    prepare(files_config(corpus, tmp_path))
    extra = write_corpus(tmp_path, "extra", 50, seed=4)
    work["screened"].clear(), work["tokenized"].clear()
    second = prepare(with_extra(files_config(corpus, tmp_path), extra))
    assert work == {"screened": ["toy", "more"], "tokenized": ["toy", "more"]}  # the tokenizer learnt from both
    assert second.corpora[0]["key"] != prepare(files_config(corpus, tmp_path)).corpora[0]["key"]


def test_shards_that_went_away_are_prepared_anew(corpus, tmp_path, work, monkeypatch, caplog):
    first = prepare(files_config(corpus, tmp_path, clean=True))
    extra = write_corpus(tmp_path, "extra", 50, seed=4)
    found = data.prepared_corpora

    def then_deleted(prepared_dir):
        listed = found(prepared_dir)
        shutil.rmtree(first.dir)
        return listed

    monkeypatch.setattr(data, "prepared_corpora", then_deleted)
    cfg = with_extra(files_config(corpus, tmp_path, clean=True), extra)
    work["screened"].clear(), work["tokenized"].clear()
    with caplog.at_level("WARNING"):
        second = prepare(cfg, first.tokenizer)
    assert "went away; preparing corpus toy anew" in caplog.text
    assert work == {"screened": ["more", "toy"], "tokenized": ["toy", "more"]}
    monkeypatch.setattr(data, "prepared_corpora", found)
    fresh = prepare(with_extra(files_config(corpus, tmp_path / "elsewhere", clean=True), extra), first.tokenizer)
    assert contents(fresh.dir) == contents(second.dir)
