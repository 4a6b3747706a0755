"""Corpus mixtures: which pairs of each training corpus an epoch sees, by the corpus's weight.

A weight w gives each epoch floor(w) copies of every pair of the corpus, plus a sample (without replacement)
of frac(w) of its pairs drawn afresh each epoch from (seed, epoch, corpus): weight 2 upsamples, 0.5 sees half
the corpus, another half each epoch; a resumed run draws the same samples.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # sources import more than an epoch's order needs
    from transformer.data.sources import Source

# SeedSequence pads a short seed with zeros, so [seed, epoch, corpus] alone could equal the batch order's
# [seed, epoch] or BPE-dropout's [seed, epoch, pair]; this last word keeps the sampling's stream apart.
_SAMPLING_STREAM = 1


@dataclass(frozen=True)
class TrainingCorpus:
    """One corpus of the training split, one shape from the config to the batches: the main one (named `data.name`)
    or a `data.extra_train.NAME` (`data.corpus.training_corpora` reads them), and once prepared its pairs."""

    name: str
    source: "Source | None" = None  # where its pairs are read (None: a split given already prepared)
    weight: float = 1.0
    tag: str = ""
    noise: float = 0.0  # word noise on the source (transformer/data/noise.py)
    reverse: bool = False  # a copy the other way round (data.both_directions): its source is the tgt_lang side
    pairs: int = 0  # its rows in the prepared training split, where the corpora lie one after the other


def corpus_starts(corpora: list[TrainingCorpus], rows: np.ndarray | None) -> np.ndarray:
    """(C + 1,) where each corpus's pairs start among the kept pairs, then their count. The corpora's rows lie one
    after the other in the split; `rows` are the kept ones (ascending), None when every row is kept."""
    ends = np.cumsum([0] + [c.pairs for c in corpora])
    return ends if rows is None else np.searchsorted(rows, ends)


def epoch_parts(starts: np.ndarray, weights: list[float], seed: int, epoch: int) -> list[range | np.ndarray]:
    """The positions (into the kept pairs) of the pairs `epoch` sees, corpus by corpus: a range for each whole copy
    of a corpus, a sorted uint32 array for a sample; `starts` as `corpus_starts` gives them. With every weight 1,
    every position in order."""
    parts: list[range | np.ndarray] = []
    for index, weight in enumerate(weights):
        low, high = int(starts[index]), int(starts[index + 1])
        whole, share = divmod(weight, 1.0)
        parts += [range(low, high)] * int(whole)
        if share > 0:
            rng = np.random.default_rng([seed, epoch, index, _SAMPLING_STREAM])
            sample = rng.choice(high - low, round(share * (high - low)), replace=False)
            parts.append(np.sort(sample).astype(np.uint32) + np.uint32(low))
    return parts


def epoch_counts(corpora: list[TrainingCorpus], starts: np.ndarray, positions: np.ndarray) -> dict[str, int]:
    """Pairs of each corpus among `positions` (an epoch's)."""
    below = [np.count_nonzero(positions < start) for start in starts[1:-1]]  # pairs before each corpus but the first
    counts = np.diff([0, *below, len(positions)])
    return {corpus.name: int(n) for corpus, n in zip(corpora, counts)}
