"""Word noise on the source side of synthetic pairs, after Edunov et al. (2018), "Understanding Back-Translation
at Scale": each word is dropped with a probability, and the words left are shuffled locally, none moving more than
`MAX_SHIFT` places (Lample et al. 2018's permutation). Edunov et al.'s third kind, a filler word in place of a word,
is left out: our vocabulary has no filler piece.

The noise is drawn once, when the data is prepared, from the pair's row in its corpus: the same corpus and
probability give the same noised sources on every machine.
"""

import numpy as np

MAX_SHIFT = 3  # the farthest a word moves
_SEED = 2018  # with the row, the seed of each pair's draw


def noised_words(words: list[str], drop: float, rng: np.random.Generator) -> list[str]:
    """`words` with each dropped with probability `drop` (one is always kept) and the rest shuffled locally."""
    kept = [word for word, draw in zip(words, rng.random(len(words))) if draw >= drop]
    if not kept and words:
        kept = [words[rng.integers(len(words))]]
    # Sorting positions i + U(0, MAX_SHIFT + 1) moves no word more than MAX_SHIFT places.
    keys = np.arange(len(kept)) + rng.uniform(0, MAX_SHIFT + 1, len(kept))
    return [kept[i] for i in np.argsort(keys, kind="stable")]


def noised_batch(batch: dict, rows: list[int], drop: float) -> dict:
    """A datasets batch with its `src` sentences noised, each by its own row's generator."""
    draws = (np.random.default_rng([_SEED, row]) for row in rows)
    return {"src": [" ".join(noised_words(s.split(), drop, rng)) for s, rng in zip(batch["src"], draws)]}
