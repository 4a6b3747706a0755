"""Corpus mixtures: which pairs of each training corpus an epoch sees, by the corpus's weight.

A weight w gives each epoch floor(w) copies of every pair of the corpus, plus a sample (without replacement)
of frac(w) of its pairs drawn afresh each epoch from (seed, epoch, corpus): weight 2 upsamples, 0.5 sees half
the corpus, another half each epoch; a resumed run draws the same samples.
"""

from dataclasses import dataclass

import numpy as np

# SeedSequence pads a short seed with zeros, so [seed, epoch, corpus] alone could equal the batch order's
# [seed, epoch] or BPE-dropout's [seed, epoch, pair]; this last word keeps the sampling's stream apart.
_SAMPLING_STREAM = 1


@dataclass(frozen=True)
class Corpus:
    """One corpus of a training split: its name, its rows (pairs) in the split, its weight and tag."""

    name: str
    size: int
    weight: float = 1.0
    tag: str = ""


def corpus_index(corpora: list[Corpus], rows: np.ndarray) -> np.ndarray:
    """The corpus (index into `corpora`) of each row of the split, the corpora's rows lying one after the other."""
    ends = np.cumsum([c.size for c in corpora])
    return np.searchsorted(ends, rows, side="right").astype(np.int32)


def epoch_positions(owner: np.ndarray, weights: list[float], seed: int, epoch: int) -> np.ndarray:
    """Positions (into `owner`, the corpus of each pair) of the pairs `epoch` sees, corpus by corpus.

    With every weight 1 it is every position in order."""
    parts = []
    for index, weight in enumerate(weights):
        own = np.flatnonzero(owner == index)
        whole, share = divmod(weight, 1.0)
        parts += [own] * int(whole)
        if share > 0:
            rng = np.random.default_rng([seed, epoch, index, _SAMPLING_STREAM])
            parts.append(np.sort(rng.choice(own, round(share * len(own)), replace=False)))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def epoch_counts(corpora: list[Corpus], owner: np.ndarray, positions: np.ndarray) -> dict[str, int]:
    """Pairs of each corpus among `positions` (an epoch's)."""
    counts = np.bincount(owner[positions], minlength=len(corpora))
    return {corpus.name: int(n) for corpus, n in zip(corpora, counts)}
