"""The measures of `scripts/benchmark_controls.py`: constraints drawn from references as the papers draw them, and
the interactive-translation figures of prefixes."""

import random
import re

from transformer.decoding.glossary import whole_words

WORD = re.compile(r"^[^\W\d_]+$")  # letters only: a phrase of such words has no punctuation stuck to it


def draw_constraints(reference: str, hypothesis: str, rng: random.Random) -> list[str]:
    """1 to 3 phrases of 1 to 3 words of `reference` that `hypothesis` lacks (as whole words), apart from each
    other, as Post & Vilar and Hu et al. draw them; [] where the reference has none."""
    words = reference.split()
    spans = [
        (start, n)
        for n in (1, 2, 3)
        for start in range(len(words) - n + 1)
        if all(WORD.match(w) for w in words[start : start + n])
        and not whole_words(" ".join(words[start : start + n])).search(hypothesis)
    ]
    rng.shuffle(spans)
    wanted, taken, phrases = rng.randint(1, 3), set(), []
    for start, n in spans:
        covered = set(range(start, start + n))
        if covered & taken or " ".join(words[start : start + n]) in phrases:
            continue
        taken |= covered
        phrases.append(" ".join(words[start : start + n]))
        if len(phrases) == wanted:
            break
    return phrases


def coverage(outputs: list[str], constraints: list[list[str]]) -> tuple[int, int]:
    """(constraints found in their output as whole words, constraints)."""
    found = sum(bool(whole_words(c).search(out)) for out, cs in zip(outputs, constraints) for c in cs)
    return found, sum(len(cs) for cs in constraints)


def half_prefixes(references: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Each reference's first half of words as a prefix ending in a space (its words complete), the rest, and the
    next word (the first of the rest); references of fewer than two words are left out (empty prefix)."""
    prefixes, rests, nexts = [], [], []
    for reference in references:
        words = reference.split()
        half = len(words) // 2
        prefixes.append(" ".join(words[:half]) + " " if half else "")
        rests.append(" ".join(words[half:]))
        nexts.append(words[half] if half < len(words) else "")
    return prefixes, rests, nexts


def completions_of(outputs: list[str], prefixes: list[str]) -> list[str]:
    """What each output adds after its prefix."""
    return [out[len(prefix) :].strip() if out.startswith(prefix) else out for out, prefix in zip(outputs, prefixes)]


def next_word_accuracy(completions: list[str], nexts: list[str]) -> float:
    """The share of completions whose first word is the reference's next word."""
    pairs = [(c.split()[:1], n) for c, n in zip(completions, nexts) if n]
    return sum(first == [n] for first, n in pairs) / max(1, len(pairs))
