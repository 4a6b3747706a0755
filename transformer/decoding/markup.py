"""Inline markup carried across a translation (`markup=xml`): the text is translated without its tags, then each tag
is put back around the target words aligned to the source words it enclosed.

Markup is XML-like: elements `<b>...</b>` (any name, attributes kept verbatim), empty elements `<br/>`, placeholders
`{name}`, and the five XML entities. The rules that put it back:

- An element spans the target words aligned to the words it enclosed, from the first to the last of them; inside
  its parent's span, and after the siblings placed before it (so the output nests as the source did).
- An element none of whose words is aligned, an empty element and a placeholder are placed after the target words
  aligned to the nearest source word before them (before those aligned to the nearest word after them, when none
  comes before; at the start when no word is aligned at all).

So the output is always well-formed and holds every tag and placeholder exactly once.
"""

import html
import re
from dataclasses import dataclass, field

TAG = r"<(/?)([A-Za-z_][\w.:-]*)((?:\s+[^<>]*?)?)\s*(/?)>"  # groups: closing /, name, attributes, empty /
TOKEN = re.compile(TAG + r"|\{[A-Za-z_]\w*\}|&(?:amp|lt|gt|quot|apos);|[<&]")


class MarkupError(ValueError):
    """Markup that is not well-formed: an unbalanced, unclosed or unknown tag, a stray `<` or `&`."""


@dataclass
class Element:
    """An element (`open`/`close` tags), an empty element or placeholder (`close` is None), or the root (no tags):
    the source words it encloses (`first`..`last`, or the word it follows for an empty one) and its children."""

    open: str = ""
    close: str | None = ""
    first: int = 0  # its first source word; for an empty one, the number of words before it
    last: int = -1  # its last source word (last < first: it encloses none)
    children: list["Element"] = field(default_factory=list)
    start: int = 0  # target words it spans, once placed: [start, end)
    end: int = 0

    @property
    def empty(self) -> bool:
        return self.close is None


@dataclass
class Marked:
    """A marked-up sentence: its text without markup (what is translated) and its elements."""

    text: str
    root: Element


def _word_at(text: str) -> int:
    """The word that the text after `text` goes on: the last one if `text` ends inside it, else the next."""
    words = len(text.split())
    return words - 1 if words and not text[-1].isspace() else words


def parse(line: str) -> Marked:
    """The text of `line` without its markup, and the tree of its elements over the text's words."""
    text, stack = "", [Element(close=None)]
    position = 0
    for match in TOKEN.finditer(line):
        text += line[position : match.start()]
        position, token = match.end(), match.group(0)
        if token in "<&":
            raise MarkupError(f"a stray {token!r} at character {match.start() + 1}: write it as {html.escape(token)}")
        if token.startswith("&"):
            text += html.unescape(token)
        elif token.startswith("{") or match.group(4):
            before = len(text.split())  # words begun before it
            stack[-1].children.append(Element(token, None, first=before, last=before - 1))
        elif not match.group(1):
            stack.append(Element(token, f"</{match.group(2)}>", first=_word_at(text)))
        else:
            if len(stack) == 1 or stack[-1].close != token.replace(" ", ""):
                expected = f"{stack[-1].close} first" if len(stack) > 1 else "no element is open"
                raise MarkupError(f"{token} at character {match.start() + 1} closes nothing open ({expected})")
            element = stack.pop()
            element.last = len(text.split()) - 1
            stack[-1].children.append(element)
    if len(stack) > 1:
        raise MarkupError(f"{stack[-1].open} is never closed (add {stack[-1].close})")
    text += line[position:]
    root = stack[0]
    root.first, root.last = 0, len(text.split()) - 1
    return Marked(text, root)


def _targets(element: Element, links: list[tuple[int, int]]) -> list[int]:
    return sorted({j for i, j in links if element.first <= i <= element.last})


def _anchor(element: Element, links: list[tuple[int, int]]) -> int:
    """Where an element with no aligned word goes: after the target words of the nearest source word before it,
    else before those of the nearest one after it, else at the start."""
    before = [i for i, _ in links if i < element.first]
    if before:
        return max(j for i, j in links if i == max(before)) + 1
    after = [i for i, _ in links if i > element.last]
    return min(j for i, j in links if i == min(after)) if after else 0


def _place(element: Element, links: list[tuple[int, int]], lo: int, hi: int) -> None:
    """Give each child a target span inside [lo, hi), after its siblings placed before it (recursively)."""
    cursor = lo
    for child in element.children:
        targets = [] if child.empty else _targets(child, links)
        start, end = (targets[0], targets[-1] + 1) if targets else (_anchor(child, links),) * 2
        child.start = min(max(start, cursor), hi)
        child.end = min(max(end, child.start), hi)
        _place(child, links, child.start, child.end)
        cursor = child.end


def _render(element: Element, words: list[str]) -> list[tuple[str, str]]:
    """(kind, text) tokens of the words in [start, end) with the children's tags around theirs; kind is word, open
    or close (an empty element or placeholder stands as a word)."""
    out, cursor = [], element.start
    for child in element.children:
        out += [("word", w) for w in words[cursor : child.start]]
        if child.empty:
            out.append(("word", child.open))
        else:
            out += [("open", child.open), *_render(child, words), ("close", child.close)]
        cursor = child.end
    return out + [("word", w) for w in words[cursor : element.end]]


def _join(tokens: list[tuple[str, str]]) -> str:
    """Tokens joined by spaces, except after an opening tag and before a closing one."""
    text, previous = "", "open"
    for kind, token in tokens:
        text += token if previous == "open" or kind == "close" else " " + token
        previous = kind
    return text


def restore(marked: Marked, translation: str, links: list[tuple[int, int]]) -> str:
    """The translation with `marked`'s markup put back by the word alignment `links` (source word, target word),
    its text escaped for XML."""
    words = [html.escape(word, quote=False) for word in translation.split()]
    root = marked.root
    root.start, root.end = 0, len(words)
    _place(root, links, 0, len(words))
    return _join(_render(root, words))
