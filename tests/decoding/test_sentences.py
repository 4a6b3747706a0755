"""Paragraphs to sentences and back; `transformer-translate split_sentences=true`."""

import pytest

pytest.importorskip("pysbd", reason="sentence splitting needs the serve extra: pip install -e '.[serve]'")

from tests.decoding.test_translator import translator  # noqa: E402
from transformer.cli.translate import translate_paragraphs  # noqa: E402
from transformer.decoding.sentences import join_text, split_line, split_text  # noqa: E402


def test_french_abbreviations_numbers_and_quotes_do_not_end_a_sentence():
    line = "M. Dupont a bu 3.5 litres d'eau, de bière, etc. avant midi. « Bonjour ! » dit-elle. Quoi ?!"
    assert split_line(line) == [
        "M. Dupont a bu 3.5 litres d'eau, de bière, etc. avant midi.",
        "« Bonjour ! » dit-elle.",
        "Quoi ?!",
    ]


def test_lines_and_blank_lines_survive_a_round_trip():
    text = "Un chien court. Un chat dort.\n\n  Deux hommes marchent.  \nFin"
    layout = split_text(text)
    assert layout == [["Un chien court.", "Un chat dort."], [], ["Deux hommes marchent."], ["Fin"]]
    assert join_text(layout) == "Un chien court. Un chat dort.\n\nDeux hommes marchent.\nFin"


def test_translate_splits_a_line_too_long_as_one_sentence(caplog):
    t = translator()  # a model of 16 positions
    sentences = ["un chien rouge dort dans le parc.", "le chat mange.", "un homme court dans le parc."]
    line = " ".join(sentences)
    with caplog.at_level("ERROR"):
        assert t.translate([line]) == [""]  # refused whole
    assert "left untranslated" in caplog.text
    out = translate_paragraphs(t, [line, "", "le chat mange."]).split("\n")
    alone = t.translate(sentences)
    assert out[:3] == [" ".join(alone), "", alone[1]] and all(alone)
