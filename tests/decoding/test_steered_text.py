"""Steering in text: typed prefixes (an unfinished last word completed), suppressed phrases, alternatives."""

import pytest

from tests.decoding.test_translator import translator
from transformer.core.errors import UserError
from transformer.decoding.steered_text import target_pieces, typed_prefix
from transformer.decoding.steering import SPACE, completions

SOURCES = ["un chien rouge", "le chat dort dans le parc", "une femme mange", "un homme"]
PREFIXES = ["the dog", "a cat sle", "a woman ", "m"]


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample", "mbr"])
def test_every_translation_starts_with_its_prefix_exactly(strategy):
    t = translator(strategy, beam_size=3, n_best=1, candidates=3, max_len_b=12)
    out = t.translate(SOURCES, prefixes=PREFIXES)
    assert all(text.startswith(prefix) for text, prefix in zip(out, PREFIXES)), out
    assert t.translate(SOURCES[:1], prefixes=[""]) == t.translate(SOURCES[:1])  # "" steers nothing


def test_an_unfinished_word_is_completed_by_the_pieces_that_spell_it():
    t = translator(max_len_b=12)
    pieces = target_pieces(t.tokenizer)
    typed = typed_prefix(t.tokenizer, "a cat sle", pieces)
    assert typed.rest == SPACE + "sle" and t.tokenizer.decode_tgt([typed.forced]) == ["a cat"]
    assert typed_prefix(t.tokenizer, "a woman ", pieces).rest == SPACE
    assert typed_prefix(t.tokenizer, "a woman ", None).rest == ""  # an engine that cannot spell forces all
    ((_, (hyp,)),) = t.search(["le chat dort"], prefixes=["a cat sle"])
    spelled = "".join(pieces[i] for i in hyp.tokens[hyp.forced :])
    assert spelled.startswith(SPACE + "sle")
    text = t.detokenize([hyp], "a cat sle")[0]
    assert text.split()[2].startswith("sle") and text == t.tokenizer.decode_tgt([hyp.tokens])[0]


def test_a_prefix_with_no_room_under_the_limit_leaves_its_sentence_alone(caplog):
    t = translator(max_len_a=0.0, max_len_b=4)
    with caplog.at_level("ERROR"):
        out = t.translate(SOURCES[:2], prefixes=["a dog sleeps in the park with a cat", "a"])
    assert out[0] == "" and out[1].startswith("a")
    assert "sentence 1: its prefix and constraints need" in caplog.text and "left untranslated" in caplog.text


def test_suppressed_phrases_and_the_unknown_piece_never_appear():
    free = translator(max_len_b=12)
    words = {w for text in free.translate(SOURCES) for w in text.split()}
    assert words
    banned = sorted(words)[:2]
    t = translator(max_len_b=12, suppress=banned, ban_unk=True)
    for ids in (hyps[0].tokens for _, hyps in t.search(SOURCES)):
        for phrase in t.tokenizer.encode_tgt(banned) + [[3]]:
            assert all(ids[i : i + len(phrase)] != phrase for i in range(len(ids)))


@pytest.mark.parametrize("prefix", ["a cat ", "a cat s"])
def test_alternatives_go_on_from_the_prefix_each_differently(prefix):
    """As many alternatives as asked where as many pieces may come next: any that starts a word after a space, only
    those that spell the typed letters after "s"."""
    t = translator("greedy", max_len_b=12, alternatives=3)
    possible = len(completions(target_pieces(t.tokenizer), t.controls().typed(prefix).rest))
    (texts,) = t.translate_nbest(["le chat dort"], prefixes=[prefix])
    assert len(texts) == min(3, possible) and len({text for text, _ in texts}) == len(texts)
    assert all(text.startswith(prefix) for text, _ in texts)


def test_wrong_constraints_are_named_and_their_sentence_alone_is_left(caplog):
    t = translator("beam", beam_size=4, max_len_b=12, suppress=["rouge"])
    given = [["dog"], [""], ["cat", "cat"], ["☃"], ["a", "b", "c", "d"], ["chien rouge"], []]
    with caplog.at_level("ERROR"):
        out = t.translate(["un chien"] * len(given), constraints=given)
    assert out[0] and out[6] and out[1:6] == [""] * 5
    for number, message in [
        (2, "constraint 1 is empty"),
        (3, "constraint 'cat' is given twice"),
        (4, "constraint '☃' has only pieces the model does not know"),
        (5, "4 constraints need decoding.beam_size=5 or more"),
        (6, "constraint 'chien rouge' holds a suppressed sequence"),
    ]:
        assert f"sentence {number}: {message}" in caplog.text


def test_a_glossary_constrains_the_sentences_holding_its_source_terms(tmp_path):
    (tmp_path / "terms.tsv").write_text("# source\ttarget\nchat\tdance\nhomme rouge\tred hat\nparc\tgarden\n")
    t = translator("beam", beam_size=4, max_len_b=12, glossary=str(tmp_path / "terms.tsv"))
    out = t.translate(["le chat dort", "un  homme rouge", "les chats", "Parc"])
    assert "dance" in out[0].split() and "red hat" in out[1]
    assert "dance" not in out[2] and "garden" not in out[3]  # whole words only, case as given
    (tmp_path / "bad.tsv").write_text("chat\tkitten\nchien\n")
    with pytest.raises(UserError, match="bad.tsv:2: a glossary line is SOURCE TERM<TAB>TARGET TERM"):
        translator("beam", glossary=str(tmp_path / "bad.tsv")).translate(["le chat"])
    assert "dance" not in translator("beam", beam_size=4).translate(["le chat dort"])[0]  # without it, none
