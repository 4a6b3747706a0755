"""Corpus sources (transformer/data/sources/): each format's pairs, one side, compressed files by suffix, and every bad
input a user can give ending in one clear UserError. Datasets are real local ones, built with `datasets`."""

import bz2
import gzip
import lzma
from collections import Counter
from pathlib import Path

import datasets
import pytest
import zstandard
from omegaconf import OmegaConf

from tests.conftest import training_pairs, write_corpus
from transformer.cli.backtranslate import monolingual
from transformer.cli.evaluate import evaluation_source
from transformer.core.config import CleanConfig, DataConfig, SourceConfig
from transformer.core.errors import UserError
from transformer.data.preparation import prepare
from transformer.data.sources import SOURCES, build_source, read_lines

PAIRS = [("un chien", "a dog"), ("le chat dort", "the cat sleeps"), ("une femme", "a woman")]
COMPRESS = {
    ".gz": gzip.compress,
    ".xz": lzma.compress,
    ".bz2": bz2.compress,
    ".zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


@pytest.fixture(autouse=True)
def datasets_cache(tmp_path, monkeypatch):
    """`datasets` converts what it does not stream into its cache: the test's own folder, not the user's."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_cache")


def source(key: str = "data.train", langs: tuple[str, str] = ("fr", "en"), **settings):
    return build_source(SourceConfig(**settings), *langs, key)


def write(path: Path, text: str | bytes) -> Path:
    data = text.encode() if isinstance(text, str) else text
    path.write_bytes(COMPRESS[path.suffix](data) if path.suffix in COMPRESS else data)
    return path


def text_pair(tmp_path: Path, pairs=PAIRS, suffix: str = "") -> tuple[str, str]:
    return tuple(
        str(write(tmp_path / f"c.{lang}{suffix}", "".join(p[i] + "\n" for p in pairs)))
        for i, lang in ((0, "fr"), (1, "en"))
    )


def test_the_format_is_inferred_from_the_settings_and_checked_against_the_table(tmp_path):
    inferred = {
        "text": {"src": "a.fr", "tgt": "a.en"},
        "tsv": {"path": "a.tsv.zst"},
        "tmx": {"path": "memory.TMX.gz"},
        "datasets": {"path": "wmt14", "name": "fr-en"},
    }
    for name, settings in inferred.items():
        assert type(source(**settings)) is SOURCES[name]
    assert type(source(path="pairs.txt", format="tsv")) is SOURCES["tsv"]
    with pytest.raises(UserError, match=r"data.train.format='csv' is not one of text, tsv, tmx, datasets"):
        source(path="a.csv", format="csv")
    with pytest.raises(UserError, match="data.train names no corpus: give data.train.src and data.train.tgt"):
        source()
    with pytest.raises(UserError, match="give either data.train.src and data.train.tgt, or data.train.path"):
        source(src="a.fr", tgt="a.en", path="a.tsv")
    with pytest.raises(UserError, match=r"data.train.columns=\[1, 1\] must be two different column numbers"):
        source(path="a.tsv", columns=[1, 1])


@pytest.mark.parametrize("suffix", ["", *COMPRESS])
def test_text_files_plain_or_compressed_give_their_pairs_and_each_side(tmp_path, suffix):
    src, tgt = text_pair(tmp_path, [*PAIRS, ("  ", "nothing")], suffix)
    corpus, skipped = source(src=src, tgt=tgt), Counter()
    assert list(corpus.pairs(skipped)) == PAIRS and skipped == {"empty": 1}
    assert list(corpus.side("en")) == [t for _, t in PAIRS] + ["nothing"]
    assert list(corpus.reversed().pairs()) == [(t, s) for s, t in PAIRS]
    assert [f[0] for f in corpus.fingerprint()["files"]] == [src, tgt]


def test_a_zstd_file_of_several_frames_is_read_whole(tmp_path):
    compressor = zstandard.ZstdCompressor()
    frames = b"".join(compressor.compress(f"{s}\t{t}\n".encode()) for s, t in PAIRS)
    (tmp_path / "c.tsv.zst").write_bytes(frames)
    assert list(source(path=str(tmp_path / "c.tsv.zst")).pairs()) == PAIRS


def test_tsv_takes_the_chosen_columns_and_skips_short_lines_without_shifting(tmp_path):
    lines = ["1\ta dog\tun chien", "2\tlonely", "3\tthe cat sleeps\tle chat dort\textra", "4\ta woman\tune femme"]
    path = str(write(tmp_path / "c.tsv.gz", "\n".join(lines) + "\n"))
    corpus, skipped = source(path=path, columns=[2, 1]), Counter()
    assert list(corpus.pairs(skipped)) == PAIRS and skipped == {"columns": 1}
    assert list(corpus.side("fr")) == [s for s, _ in PAIRS]
    assert corpus.describe() == f"{path}, columns 2 and 1"
    with pytest.raises(UserError, match="it holds fr and en, not de"):
        list(corpus.side("de"))


TMX = """<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4">
  <header srclang="fr-FR" datatype="plaintext" segtype="sentence" adminlang="en" o-tmf="x" creationtool="t"
          creationtoolversion="1"/>
  <body>
    <tu><tuv xml:lang="fr-FR"><seg>un chien</seg></tuv><tuv xml:lang="EN-GB"><seg>a dog</seg></tuv></tu>
    <tu>
      <tuv xml:lang="fr"><seg><bpt i="1">&lt;b&gt;</bpt>le chat<ept i="1">&lt;/b&gt;</ept> <hi>dort</hi></seg></tuv>
      <tuv xml:lang="en-US"><seg>the <ph>&lt;br/&gt;</ph>cat <it pos="begin">{</it>sleeps</seg></tuv>
    </tu>
    <tu><tuv xml:lang="fr"><seg>seul</seg></tuv><tuv xml:lang="de"><seg>allein</seg></tuv></tu>
    <tu><tuv lang="FR_ca"><seg>une
      femme</seg></tuv><tuv lang="en"><seg>a woman</seg></tuv></tu>
  </body>
</tmx>
"""


@pytest.mark.parametrize("name", ["m.tmx", "m.tmx.xz"])
def test_tmx_matches_regional_codes_drops_native_code_and_skips_units_without_both(tmp_path, name):
    corpus, skipped = source(path=str(write(tmp_path / name, TMX))), Counter()
    assert list(corpus.pairs(skipped)) == PAIRS and skipped == {"missing language": 1}
    assert list(corpus.side("fr")) == ["un chien", "le chat dort", "seul", "une femme"]
    assert list(source(path=str(tmp_path / name), langs=("de", "fr")).pairs()) == [("allein", "seul")]


def test_tmx_without_one_language_or_not_well_formed_is_one_clear_error(tmp_path):
    path = write(tmp_path / "m.tmx", TMX)
    with pytest.raises(UserError, match=r"no unit holds language 'es' \(its languages: EN-GB, FR_ca, de, en"):
        list(source(path=str(path), langs=("fr", "es")).pairs())
    broken = write(tmp_path / "broken.tmx", TMX.replace("<seg>a dog</seg>", "<seg>a dog</sag>"))
    with pytest.raises(UserError, match=r"data.train: .*broken.tmx:6: not well-formed XML \(mismatched tag"):
        list(source(path=str(broken)).pairs())


def translation_rows(pairs=PAIRS) -> dict[str, list]:
    return {"translation": [{"en": t, "fr": s} for s, t in pairs], "id": list(range(len(pairs)))}


def test_datasets_from_a_save_to_disk_folder_its_splits_and_named_columns(tmp_path):
    folder = tmp_path / "saved"
    split = datasets.Dataset.from_dict(translation_rows())
    datasets.DatasetDict({"train": split, "validation": split.select([1])}).save_to_disk(str(folder))
    assert list(source(path=str(folder)).pairs()) == PAIRS
    assert list(source(path=str(folder), split="validation").side("en")) == ["the cat sleeps"]
    columns = tmp_path / "columns"
    datasets.Dataset.from_dict({"english": [t for _, t in PAIRS], "french": [s for s, _ in PAIRS]}).save_to_disk(
        str(columns)
    )
    assert list(source(path=str(columns), columns=["french", "english"]).pairs()) == PAIRS
    with pytest.raises(UserError, match="no column 'translation'; its columns: english, french"):
        list(source(path=str(columns)).pairs())
    with pytest.raises(UserError, match=r"its 'translation' column has no language 'de' \(its languages: en, fr\)"):
        list(source(path=str(folder), langs=("de", "en")).pairs())
    assert source(path=str(folder)).fingerprint()["files"]  # a local dataset: its files' sizes and times


@pytest.mark.parametrize("streaming", [True, False])
def test_datasets_from_parquet_and_json_lines_files(tmp_path, streaming):
    rows = datasets.Dataset.from_dict(translation_rows([*PAIRS, ("vide", "")]))
    rows.to_parquet(str(tmp_path / "pairs.parquet"))
    rows.to_json(str(tmp_path / "pairs.jsonl"))
    for name in ("pairs.parquet", "pairs.jsonl"):
        skipped = Counter()
        assert list(source(path=str(tmp_path / name), streaming=streaming).pairs(skipped)) == PAIRS
        assert skipped == {"empty": 1}


def test_a_dataset_repository_loads_by_path_name_and_split_as_a_hub_name_does(tmp_path):
    """A folder laid out as a hub repository (a README naming its configurations) goes through the same
    `load_dataset(path, name, split=...)` call as `wmt14`, `fr-en`."""
    repo = tmp_path / "repo"
    (repo / "fr-en").mkdir(parents=True)
    datasets.Dataset.from_dict(translation_rows()).to_json(str(repo / "fr-en" / "train.jsonl"))
    datasets.Dataset.from_dict(translation_rows(PAIRS[:1])).to_json(str(repo / "fr-en" / "test.jsonl"))
    (repo / "README.md").write_text(
        "---\nconfigs:\n- config_name: fr-en\n  data_files:\n  - split: train\n    path: fr-en/train.jsonl\n"
        "  - split: test\n    path: fr-en/test.jsonl\n---\n"
    )
    assert list(source(path=str(repo), name="fr-en").pairs()) == PAIRS
    assert list(source(path=str(repo), name="fr-en", split="test", streaming=False).pairs()) == PAIRS[:1]
    with pytest.raises(UserError, match=r"data.train \(dataset .* \(fr-en, split nope\)\): cannot load it"):
        list(source(path=str(repo), name="fr-en", split="nope").pairs())
    hub = source(path="wmt14", name="fr-en", revision="main").fingerprint()
    assert hub == {"dataset": "wmt14", "name": "fr-en", "split": "train", "revision": "main"}


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_a_cut_short_compressed_file_is_one_error_naming_it(tmp_path, suffix):
    src, tgt = text_pair(tmp_path, PAIRS * 500, suffix)
    Path(src).write_bytes(Path(src).read_bytes()[:-20])
    with pytest.raises(UserError, match=rf"c\.fr{suffix} is not a valid \w+ file .*cut short"):
        list(source(src=src, tgt=tgt).pairs())
    (tmp_path / f"plain{suffix}").write_text("un chien\n")  # plain text under a compressed name
    with pytest.raises(UserError, match=rf"plain{suffix} is not a valid \w+ file"):
        list(read_lines(tmp_path / f"plain{suffix}"))


def test_invalid_utf8_names_the_file_and_line(tmp_path):
    tsv = write(tmp_path / "c.tsv", b"un\tone\ndeux\xff\ttwo\n")
    with pytest.raises(UserError, match=r"c\.tsv:2: not valid UTF-8"):
        list(source(path=str(tsv)).pairs())
    src, tgt = write(tmp_path / "b.fr.bz2", b"un\n\xfe\n"), write(tmp_path / "b.en", b"one\ntwo\n")
    with pytest.raises(UserError, match=r"b\.fr\.bz2:2: not valid UTF-8"):
        list(source(src=str(src), tgt=str(tgt)).pairs())


def test_text_files_of_different_lengths_are_found_at_the_end_of_the_stream(tmp_path):
    src, tgt = write(tmp_path / "a.fr.gz", "un\ndeux\ntrois\n"), write(tmp_path / "a.en", "one\ntwo\n")
    pairs = source(key="data.val", src=str(src), tgt=str(tgt)).pairs()
    assert [next(pairs), next(pairs)] == [("un", "one"), ("deux", "two")]  # read before the end is known
    with pytest.raises(UserError, match=r"data.val .*a\.fr\.gz has 3 lines but .*a\.en has 2"):
        next(pairs)


def test_evaluate_and_backtranslate_take_a_source(tmp_path):
    tsv = write(tmp_path / "t.tsv", "".join(f"{s}\t{t}\n" for s, t in PAIRS))
    data = OmegaConf.create({"src_lang": "fr", "tgt_lang": "en"})
    evaluate = OmegaConf.create({"src_file": None, "ref_file": None, "split": "x", "source": {"path": str(tsv)}})
    name, pairs = evaluation_source(evaluate, data)
    assert name == "t.tsv" and list(pairs.pairs()) == PAIRS
    backtranslate = OmegaConf.create({"input": None, "source": {"path": str(tsv), "columns": [1, 0]}})
    inputs, lines = monolingual(backtranslate, OmegaConf.create({"src_lang": "en", "tgt_lang": "fr"}))
    assert list(lines) == [t for _, t in PAIRS] and inputs == [f"{tsv}, columns 1 and 0, en side"]


def test_prepare_reads_a_tsv_main_corpus_and_a_tmx_extra_corpus(tmp_path):
    train, val = write_corpus(tmp_path, "train", 60, seed=1), write_corpus(tmp_path, "val", 8, seed=2)
    rows = zip(*(p.read_text().splitlines() for p in train))
    tsv = write(tmp_path / "train.tsv.zst", "".join(f"{s}\t{t}\n" for s, t in rows) + "short line\n")
    cfg = DataConfig(
        name="toy",
        prepared_dir=str(tmp_path / "prepared"),
        train=SourceConfig(path=str(tsv)),
        val=SourceConfig(*map(str, val)),
        extra_train={"memory": {"path": str(write(tmp_path / "m.tmx.gz", TMX)), "tag": "tm"}},
        clean=CleanConfig(max_ratio=0, duplicates=False, equal_sides=False, eval_overlap=False),
    )
    cfg.tokenizer.vocab_size = 60
    prepared = prepare(cfg)
    assert [(c["name"], c["pairs"]) for c in prepared.corpora] == [("toy", 60), ("memory", 3)]
    assert prepared.corpora[0]["cleaning"]["columns"] == 1 and prepared.corpora[1]["cleaning"]["read"] == 4
    pairs = training_pairs(prepared)
    assert pairs[60][0] == "un chien" and pairs[61][1] == "the cat sleeps"
    assert prepare(cfg).dir == prepared.dir  # the fingerprints are stable: reused
