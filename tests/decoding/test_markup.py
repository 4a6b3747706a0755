"""Markup carried across a translation: parsed off the source, put back by the alignment, always well-formed."""

import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer.decoding.markup import MarkupError, parse, restore

TAG = re.compile(r"<[^<>]+>|\{\w+\}")


def well_formed(text: str) -> ET.Element:
    return ET.fromstring(f"<root>{text}</root>")


def test_tags_go_around_the_target_words_aligned_to_the_words_they_enclosed():
    marked = parse("Le <b>chien <i>rouge</i></b> court.")
    assert marked.text == "Le chien rouge court."
    links = [(0, 0), (1, 2), (2, 1), (3, 3)]  # The red dog runs.
    assert restore(marked, "The red dog runs.", links) == "The <b><i>red</i> dog</b> runs."


def test_attributes_entities_empty_elements_and_placeholders_are_kept():
    marked = parse('Un <a href="x.html?a=1&amp;b=2">chat</a> noir &amp; blanc,<br/> {name} !')
    assert marked.text == "Un chat noir & blanc,  !"
    links = [(0, 0), (1, 4), (2, 1), (3, 2), (4, 3), (5, 5)]  # A black & white cat, !
    out = restore(marked, "A black & white cat, !", links)
    assert out == 'A black &amp; white <a href="x.html?a=1&amp;b=2">cat,</a> <br/> {name} !'
    well_formed(out)


def test_an_element_without_aligned_words_goes_after_the_nearest_aligned_word_before_it():
    marked = parse("Il <b>a</b> faim")
    assert restore(marked, "He is hungry", [(0, 0), (2, 2)]) == "He <b></b> is hungry"
    assert restore(parse("<b>Il</b> faim"), "He hungry", [(1, 1)]) == "He <b></b> hungry"  # none before: before after
    assert restore(parse("<b>Il</b>"), "He", []) == "<b></b> He"  # nothing aligned: at the start


def test_a_tag_inside_a_word_marks_that_word():
    marked = parse("chien<b>s</b> noirs")
    assert marked.text == "chiens noirs"
    assert restore(marked, "black dogs", [(0, 1), (1, 0)]) == "black <b>dogs</b>"


@pytest.mark.parametrize(
    "line, message",
    [
        ("un <b>chien", "<b> is never closed"),
        ("un chien</b>", "</b> at character 9 closes nothing open"),
        ("<b>un <i>chien</b></i>", "</b> at character 15 closes nothing open (</i> first)"),
        ("a < b", "a stray '<' at character 3"),
        ("fish & chips", "a stray '&' at character 6"),
    ],
)
def test_markup_that_is_not_well_formed_is_refused_with_where(line, message):
    with pytest.raises(MarkupError, match=re.escape(message)):
        parse(line)


WORDS = st.sampled_from(["le", "chien", "rouge", "court", "vite", "ici", "&amp;", "a"])


@st.composite
def marked_up(draw, depth: int = 0) -> str:
    """A random well-formed marked-up sentence."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["word", "word", "element", "empty", "placeholder"] if depth < 3 else ["word"]))
        if kind == "word":
            parts.append(draw(WORDS))
        elif kind == "element":
            name = draw(st.sampled_from(["b", "i", "span"]))
            parts.append(f"<{name}>{draw(marked_up(depth + 1))}</{name}>")
        else:
            parts.append("<br/>" if kind == "empty" else "{x}")
    return " ".join(parts)


@settings(max_examples=300, deadline=None)
@given(marked_up(), st.lists(WORDS, max_size=8), st.data())
def test_the_output_is_well_formed_with_every_tag_once_and_the_words_in_order(line, target, data):
    marked = parse(line)
    n_source = len(marked.text.split())
    pairs = st.tuples(st.integers(0, max(n_source - 1, 0)), st.integers(0, max(len(target) - 1, 0)))
    links = data.draw(st.lists(pairs, max_size=10)) if n_source and target else []
    translation = " ".join(t.replace("&amp;", "&") for t in target)
    out = restore(marked, translation, links)
    well_formed(out)
    assert Counter(TAG.findall(out)) == Counter(TAG.findall(line))
    assert TAG.sub(" ", out).split() == [w.replace("&", "&amp;") for w in translation.split()]


@pytest.mark.slow
def test_translate_carries_the_markup_of_each_line_and_notes_a_bad_one(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from transformer.bench.tiny import write_checkpoint

    checkpoint = write_checkpoint(tmp_path / "tiny.safetensors")
    lines = ['un <b>chien</b> <a href="#">rouge</a> {n}', "un <i>chien", "le <b>chat <i>noir</i></b> dort<br/>"]
    command = [str(Path(sys.executable).parent / "transformer-translate"), f"checkpoint={checkpoint}", "markup=xml"]
    result = subprocess.run(command, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout.split("\n")[:-1]
    assert len(out) == 3 and out[1] == "" and "line 2: <i> is never closed" in result.stderr
    for source, translated in ((lines[0], out[0]), (lines[2], out[2])):
        well_formed(translated)
        assert Counter(TAG.findall(translated)) == Counter(TAG.findall(source))


def test_a_greater_than_sign_is_text_and_comes_back_escaped():
    marked = parse("3 > 2 <b>oui</b>")
    assert marked.text == "3 > 2 oui"
    assert restore(marked, "3 > 2 yes", [(0, 0), (1, 1), (2, 2), (3, 3)]) == "3 &gt; 2 <b>yes</b>"
