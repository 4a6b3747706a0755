"""Word alignments from cross-attention: pieces merged into words, the most attended source word, Pharaoh lines."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import tiny_model
from tests.models.test_rnn import tiny_rnn
from transformer.data.tokenizer import word_index
from transformer.decoding.alignment import (
    Aligner,
    AttentionHead,
    attention_weights,
    default_head,
    links,
    parse_pharaoh,
    pharaoh,
)

BIN = Path(sys.executable).parent


def test_pieces_belong_to_the_word_their_last_word_start_opened():
    assert word_index(["<tag>", "▁Le", "▁chi", "en", "▁", ".", "▁"]) == [-1, 0, 1, 1, 2, 2, 3]
    assert word_index([]) == []


def test_each_target_piece_links_its_word_to_the_word_of_its_most_attended_source_piece():
    src_words, tgt_words = [0, 1, 1], [0, 1, 1, 2]
    weights = torch.tensor(
        [  # columns: three source pieces, then EOS (never linked, however much attended)
            [0.7, 0.1, 0.1, 0.1],
            [0.1, 0.2, 0.6, 0.1],
            [0.0, 0.0, 0.1, 0.9],  # attends to EOS most: its best source piece is piece 2
            [0.5, 0.2, 0.2, 0.1],
            [0.0, 0.0, 0.0, 1.0],  # the EOS row: no link
        ]
    )
    assert links(weights, src_words, tgt_words) == [(0, 0), (0, 2), (1, 1)]
    assert links(weights, [-1, 0, 0], [0]) == [(0, 0)]  # a tag piece is never linked, even when attended most
    assert links(weights, [], tgt_words) == [] and links(weights, src_words, []) == []


def test_pharaoh_lines_round_trip_and_refuse_what_is_not_a_link():
    assert pharaoh([(0, 0), (2, 1)]) == "0-0 2-1"
    assert parse_pharaoh("0-0 2-1 3?4") == {(0, 0), (2, 1), (3, 4)}
    with pytest.raises(ValueError, match="not a Pharaoh link"):
        parse_pharaoh("0-0 x-1")


def test_a_guided_model_aligns_with_its_trained_head_by_default():
    guided = {"weight": 0.05, "layer": -2, "head": 1}
    assert default_head(None, None, guided, 3) == AttentionHead(-2, 1)
    assert default_head(1, None, guided, 3) == AttentionHead(1, 1)  # layer 1 of 3 is layer -2
    assert default_head(0, None, guided, 3) == AttentionHead(0, None)  # another layer: the mean over its heads
    assert default_head(None, 2, guided, 3) == AttentionHead(-2, 2)
    assert default_head(None, None, {**guided, "weight": 0.0}, 3) == AttentionHead(-2, None)
    assert default_head(None, None, None, 1) == AttentionHead(-1, None)  # one layer (the RNN): that one


@pytest.mark.parametrize("head", [AttentionHead(-1, None), AttentionHead(0, 2)])
def test_a_pair_s_weights_are_the_same_alone_and_batched(head):
    model = tiny_model(seed=1)
    srcs, tgts = [[5, 6, 7, 8, 9], [10, 11], [12]], [[5, 6], [7, 8, 9, 10], []]
    batched = attention_weights(model, srcs, tgts, head)
    for w, s, t in zip(batched, srcs, tgts):
        (alone,) = attention_weights(model, [s], [t], head)
        assert w.shape == (len(t) + 1, len(s) + 1)
        torch.testing.assert_close(w, alone, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(w.sum(dim=1), torch.ones(len(t) + 1))


def test_a_layer_or_head_the_model_lacks_is_refused():
    model = tiny_model(seed=1)
    for head, message in ((AttentionHead(2, None), "layer 2 does not exist"), (AttentionHead(0, 4), "head 4")):
        with pytest.raises(ValueError, match=message):
            attention_weights(model, [[5]], [[6]], head)


@pytest.mark.parametrize("family", ["transformer", "rnn"])
def test_every_target_word_is_linked_to_a_source_word(family):
    torch.manual_seed(0)
    model = tiny_model(seed=2) if family == "transformer" else tiny_rnn(seed=2)
    pieces = [f"▁w{i}" if i % 3 else f"x{i}" for i in range(40)]  # every third piece continues a word
    aligner = Aligner(model, pieces, pieces, default_head(None, None, None, model.cross_attention_layers))
    srcs, tgts = [[4, 5, 6, 7], [8, 10, 11]], [[13, 14, 15], [16, 17]]
    for found, s, t in zip(aligner.links(srcs, tgts, batch_size=1), srcs, tgts):
        src_words, tgt_words = word_index([pieces[i] for i in s]), word_index([pieces[i] for i in t])
        assert {j for _, j in found} == set(tgt_words) - {-1}
        assert {i for i, _ in found} <= set(src_words) - {-1}


@pytest.mark.slow
def test_translate_writes_each_translation_with_its_alignment(cli_setup):
    base = [str(BIN / "transformer-translate"), cli_setup["ckpt"], "decoding.precision=fp32", "alignments=true"]
    sentences = 'sentences=["un chien rouge","","le chat"]'
    one = subprocess.run([*base, sentences], capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-2000:]
    rows = [line.split("\t") for line in one.stdout.splitlines()]
    assert len(rows) == 3 and rows[1] == ["", ""]
    for (text, line), source in zip(rows, ["un chien rouge", "", "le chat"]):
        for i, j in parse_pharaoh(line):
            assert i < len(source.split()) and j < len(text.split())
    nbest = subprocess.run([*base, sentences, "decoding=beam", "decoding.n_best=2"], capture_output=True, text=True)
    assert nbest.returncode == 0, nbest.stderr[-2000:]
    fields = [line.split("\t") for line in nbest.stdout.splitlines()]
    assert [f[0] for f in fields] == ["1", "1", "2", "3", "3"] and all(len(f) == 4 for f in fields)
    assert fields[2] == ["2", "0.0000", "", ""]
