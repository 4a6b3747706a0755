"""Cleaning of the training corpora when they are prepared: which pairs each rule drops, counted per corpus.

Val and test pairs are never dropped. The text rules (duplicate, equal sides, eval overlap) are decided before
SentencePiece is trained, which learns from the pairs they keep; the token rules (too long, ratio) after
tokenization, on the pairs the text rules kept. A pair that breaks several rules is counted once, under the first of
`RULES` it breaks. A source's own skips (a malformed line or unit) are counted under the reason it gives.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from transformer.core.config import CleanConfig

RULES = ("empty", "duplicate", "equal sides", "eval overlap", "too long", "ratio")


@dataclass
class CleaningReport:
    """How many pairs a corpus's files hold and how many each rule dropped."""

    read: int
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def kept(self) -> int:
        return self.read - sum(self.dropped.values())

    def __str__(self) -> str:
        reasons = [*RULES, *(reason for reason in self.dropped if reason not in RULES)]
        counts = ", ".join(f"{reason} {self.dropped.get(reason, 0):,}" for reason in reasons)
        return f"kept {self.kept:,} of {self.read:,}: {counts}"


def _digest(src: str, tgt: str) -> int:
    """A 64-bit fingerprint of a pair (equal pairs, equal fingerprints; a chance collision: about N²/2⁶⁵)."""
    return int.from_bytes(hashlib.blake2b(f"{src}\0{tgt}".encode(), digest_size=8).digest(), "little")


def text_flags(
    pairs: Iterable[tuple[str, str]], n: int, cfg: CleanConfig, evals: tuple[set[str], set[str]]
) -> dict[str, np.ndarray]:
    """For each of the `n` pairs: a repeat of an earlier pair, source equal to target, a side equal to a sentence of
    the val or test splits on that side (`evals`: their sources, their targets). A rule that is off flags none."""
    digests = np.empty(n, dtype=np.uint64)
    equal, overlap = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    eval_src, eval_tgt = evals
    for i, (src, tgt) in enumerate(pairs):
        digests[i] = _digest(src, tgt)
        equal[i] = src == tgt
        overlap[i] = src in eval_src or tgt in eval_tgt
    duplicate = np.ones(n, dtype=bool)
    duplicate[np.unique(digests, return_index=True)[1]] = False  # each pair's first occurrence stays
    return {
        "duplicate": duplicate & cfg.duplicates,
        "equal sides": equal & cfg.equal_sides,
        "eval overlap": overlap & cfg.eval_overlap,
    }


def token_flags(src_len: np.ndarray, tgt_len: np.ndarray, tag_len: int, max_len: int, max_ratio: float) -> dict:
    """For each pair (token counts without EOS; the source's without its `tag_len` tag tokens): a side over
    `max_len` tokens as the model sees it (tag and EOS included), and sides whose lengths (EOS included) differ by
    more than `max_ratio` times (0: off)."""
    src, tgt = src_len + 1, tgt_len + 1
    longer, shorter = np.maximum(src, tgt), np.minimum(src, tgt)
    return {
        "too long": np.maximum(src + tag_len, tgt) > max_len,
        "ratio": longer > max_ratio * shorter if max_ratio > 0 else np.zeros(len(src), dtype=bool),
    }


def keep_mask(flags: dict[str, np.ndarray], report: CleaningReport) -> np.ndarray:
    """The pairs no rule flags; counts each dropped pair in `report` under the first rule (in `RULES`) it breaks."""
    dropped = np.zeros(len(next(iter(flags.values()))), dtype=bool)
    for rule in RULES:
        if rule in flags:
            hit = flags[rule] & ~dropped
            report.dropped[rule] = report.dropped.get(rule, 0) + int(hit.sum())
            dropped |= hit
    return ~dropped
