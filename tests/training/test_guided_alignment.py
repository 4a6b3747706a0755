"""Guided alignment: eflomal's links of the training split, mapped to pieces, and a head trained towards them."""

import numpy as np
import pytest
import torch

from tests.training.test_training import make_trainer, scalars, toy_overrides
from transformer.core.errors import UserError
from transformer.data.batching import link_tensors
from transformer.data.guided_links import piece_links, pieces_to_words, prepare_links, read_links
from transformer.data.preparation import prepare
from transformer.data.word_links import eflomal_links, grow_diag_final_and
from transformer.runs.checkpoint import load_checkpoint
from transformer.training.loss import guided_loss_sums

GUIDED = ["data.word_alignment=eflomal", "trainer.guided_alignment.weight=1.0", "trainer.guided_alignment.layer=-1"]


def test_grow_diag_final_and_keeps_the_intersection_and_grows_towards_unaligned_words():
    forward = {(0, 0), (1, 1), (2, 1)}
    reverse = {(0, 0), (1, 1), (3, 3), (2, 2)}
    links = grow_diag_final_and(forward, reverse)
    assert {(0, 0), (1, 1)} <= links  # the intersection
    assert (2, 1) in links and (2, 2) in links  # neighbours of (1, 1) aligning the unaligned source word 2
    assert (3, 3) in links  # final-and: both words unaligned so far
    assert grow_diag_final_and(set(), set()) == set()


def test_pieces_merge_into_lowercased_words_and_word_links_into_piece_links():
    text, src_of = pieces_to_words(["<tag>", "▁Le", "▁chi", "en", "▁", "."])
    assert text == "le chien ." and src_of == [-1, 0, 1, 1, 2, 2]
    tgt_text, tgt_of = pieces_to_words(["▁the", "▁do", "g", "▁."])
    assert tgt_text == "the dog ." and tgt_of == [0, 1, 1, 2]
    flat = piece_links({(0, 0), (1, 1), (2, 2)}, src_of, tgt_of)
    pairs = set(zip(flat[0::2], flat[1::2]))
    assert pairs == {(0, 1), (1, 2), (1, 3), (2, 2), (2, 3), (3, 4), (3, 5)}  # (target piece, source piece)


def test_each_target_piece_shares_one_unit_of_weight_among_its_links():
    links, weights = link_tensors(np.array([0, 1, 0, 2, 1, 1, 0, 0]), np.array([6, 2]))
    assert links.tolist() == [[0, 0, 1], [0, 0, 2], [0, 1, 1], [1, 0, 0]]
    assert weights.tolist() == [0.5, 0.5, 1.0, 1.0]


def test_eflomal_finds_the_word_for_word_links_of_the_toy_corpus():
    from tests.conftest import WORDS_EN, WORDS_FR

    rng = np.random.default_rng(0)
    rows = [rng.integers(len(WORDS_FR), size=rng.integers(2, 7)) for _ in range(400)]
    src = [" ".join(WORDS_FR[i] for i in row) for row in rows]
    tgt = [" ".join(WORDS_EN[i] for i in row) for row in rows]
    found = eflomal_links(src, tgt)
    diagonal = [{(i, i) for i in range(len(row))} for row in rows]
    right = sum(len(f & d) for f, d in zip(found, diagonal))
    assert right / sum(map(len, diagonal)) > 0.9


@pytest.mark.slow
def test_guided_training_lowers_the_alignment_loss_and_logs_it(corpus, tmp_path):
    base = [*toy_overrides(corpus, tmp_path), "trainer.max_steps=40", "optim.lr=3e-3", "trainer.seed=3"]
    guided = make_trainer([*base, *GUIDED], tmp_path / "guided")
    plain = make_trainer([*base, "data.word_alignment=eflomal"], tmp_path / "plain")
    guided.fit(), plain.fit()
    data = guided.train_data
    batch = data.collate(data.epoch(0)[0], 0)
    losses = {}
    for name, trainer in (("guided", guided), ("plain", plain)):
        trainer.model.eval()
        with torch.no_grad():
            _, alignment = guided_loss_sums(trainer.model, batch, 0.0, guided.cfg.trainer.guided_alignment)
        losses[name] = alignment.item() / batch.n_tokens
    assert losses["guided"] < 0.7 * losses["plain"]
    logged = scalars(tmp_path / "guided", "train/alignment_loss")
    assert len(logged) == 40 and logged[-1][1] < logged[0][1]
    # the links cover the training split, one row a pair, and a later run reuses them
    prepared = prepare(guided.cfg.data)
    parts = sorted((prepared.dir / "alignments").glob("eflomal-*/part-*.arrow"))
    stamps = [p.stat().st_mtime_ns for p in parts]
    folder = prepare_links(prepared, "eflomal", guided.cfg.data.word_alignment_chunk)
    assert [p.stat().st_mtime_ns for p in parts] == stamps and len(read_links(folder, len(data.ds))) == len(data.ds)
    ckpt = load_checkpoint(str(tmp_path / "guided" / "checkpoints" / "last.safetensors"))
    assert ckpt.config.trainer.guided_alignment.weight == 1.0


def test_the_links_are_prepared_chunk_by_chunk_and_a_rerun_writes_only_the_missing_ones(corpus, tmp_path):
    from hydra import compose, initialize_config_dir

    from tests.conftest import files_data
    from transformer.cli import CONFIG_PATH

    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        cfg = compose("train", overrides=files_data(corpus["train"], corpus["val"], tmp_path / "prepared"))
    prepared = prepare(cfg.data)
    train = prepared.split("train")
    assert 240 < len(train) <= 300  # the toy corpus after cleaning
    folder = prepare_links(prepared, "eflomal", 120)  # chunks of 120, 120 and the rest
    parts = sorted(folder.glob("part-*.arrow"))
    assert [p.name for p in parts] == ["part-00000.arrow", "part-00001.arrow", "part-00002.arrow"]
    stamps = {p.name: p.stat().st_mtime_ns for p in parts}
    parts[1].unlink()  # as if killed before its chunk was written (a write is a temporary file renamed into place)
    (folder / ".part-00001.arrow.tmp123").write_bytes(b"half")
    prepare_links(prepared, "eflomal", 120)
    assert {p.name: p.stat().st_mtime_ns for p in sorted(folder.glob("part-*.arrow"))}.keys() == stamps.keys()
    assert all(p.stat().st_mtime_ns == stamps[p.name] for p in (parts[0], parts[2]))
    links = read_links(folder, len(train))
    for row in (0, 150, len(train) - 1):  # each pair's links index its own pieces
        pairs = links[row].as_py()
        assert pairs and max(pairs[0::2]) < len(train[row]["tgt_ids"]) and max(pairs[1::2]) < len(train[row]["src_ids"])
    with pytest.raises(UserError, match=f"cover {len(train)} pairs, not {len(train) + 1}"):
        read_links(folder, len(train) + 1)
