"""Given translations to score, as ids: each pair that can be scored, and for the others why not (an empty side,
a side longer than the model takes, a target the vocabulary cannot spell)."""

from dataclasses import dataclass

from transformer.core.special_ids import UNK_ID
from transformer.data.tokenizer import Tokenizer


@dataclass(frozen=True)
class Unscored:
    """Why a pair was not scored."""

    reason: str


@dataclass
class GivenPairs:
    """Source ids (a tag's piece first) and target ids of each pair; `problems[i]` is None where pair i can be
    scored."""

    src_ids: list[list[int]]
    tgt_ids: list[list[int]]
    problems: list[Unscored | None]

    @property
    def todo(self) -> list[int]:
        """The pairs that can be scored."""
        return [i for i, problem in enumerate(self.problems) if problem is None]


def _problem(source: str, target: str, src: list[int], tgt: list[int], limit: int, pieces: list[str]) -> str | None:
    if not source:
        return "the source is empty"
    if not target:
        return "the target is empty"
    for side, ids in (("source", src), ("target", tgt)):
        if len(ids) > limit:
            return f"the {side} has {len(ids)} tokens, more than the model's limit of {limit}"
    if UNK_ID in tgt:
        unknown = sorted({c for c in target if not c.isspace() and all(c not in p for p in pieces)})
        shown = " ".join(unknown[:5]) or "some characters"
        return f"the target holds characters the model's vocabulary cannot spell ({shown})"
    return None


def encode_pairs(
    tokenizer: Tokenizer, sources: list[str], targets: list[str], max_positions: int, tag: str = ""
) -> GivenPairs:
    """Encode the pairs (stripped) for scoring, checking each: both sides must be non-empty and, with EOS (BOS),
    fit the model's `max_positions`; the target must hold no unknown piece."""
    sources, targets = [s.strip() for s in sources], [t.strip() for t in targets]
    src_ids, tgt_ids = tokenizer.encode_src(sources, tag), tokenizer.encode_tgt(targets)
    pieces = tokenizer.piece_table("tgt") if any(UNK_ID in t for t in tgt_ids) else []
    limit = max_positions - 1  # room for EOS (source) or BOS (target)
    problems = []
    for source, target, src, tgt in zip(sources, targets, src_ids, tgt_ids):
        reason = _problem(source, target, src, tgt, limit, pieces)
        problems.append(None if reason is None else Unscored(reason))
    return GivenPairs(src_ids, tgt_ids, problems)
