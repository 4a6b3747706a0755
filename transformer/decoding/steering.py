"""How a user steers a search: target ids forced first (a prefix), characters the next pieces must spell (the
prefix's unfinished last word), and id sequences never generated.

`Controls` holds them for a batch of source sentences; `Steering` applies them to a `SearchState`'s rows at each
step. A forced token keeps the model's own log-probability, so a hypothesis' `token_scores` show how likely its
prefix was; its `score` and `logprob` count only the tokens after the forced ones (CTranslate2's `target_prefix`
convention), and beam search still divides by the whole length. Pieces that complete a typed word are searched, not
forced: they count.
"""

from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

NEG_INF = float("-inf")
SPACE = "▁"  # SentencePiece's mark of a space


@dataclass
class Controls:
    """What steers the search of a batch of B source sentences.

    `prefixes`: per sentence, target ids forced first ([] none). `partial`: per sentence, characters in piece form
    ("▁pl": a word starting "pl") that the first searched pieces must spell out before the search is free ("" none;
    needs `pieces`, the target pieces by id, "" for a piece that spells nothing). `suppress`: id sequences no
    hypothesis may contain (a prefix may). `alternatives`: k > 0 asks for the k likeliest first pieces after each
    prefix, each completed (`decoding.alternatives`). `lone_end`: a beam lets only its best candidate end a sentence
    right after its prefix. `constraints`: per sentence, id phrases that every hypothesis must hold
    (`decoding.constrained`).
    """

    prefixes: list[list[int]] | None = None
    partial: list[str] | None = None
    suppress: list[list[int]] = field(default_factory=list)
    pieces: list[str] | None = None
    alternatives: int = 0
    lone_end: bool = True
    constraints: list[list[list[int]]] | None = None

    def rest_after(self, rest: str, token: int) -> str:
        """What is left of `rest` to spell once `token` is taken ("" once spelled, or where the token does not)."""
        piece = self.pieces[token] if self.pieces is not None and token < len(self.pieces) else ""
        return rest[len(piece) :] if piece and rest.startswith(piece) else ""

    def rows(self, index: Tensor) -> "Controls":
        """These controls for the sentences `index` (repeats allowed), in that order."""
        chosen = index.tolist()
        prefixes = None if self.prefixes is None else [self.prefixes[i] for i in chosen]
        partial = None if self.partial is None else [self.partial[i] for i in chosen]
        constraints = None if self.constraints is None else [self.constraints[i] for i in chosen]
        return replace(self, prefixes=prefixes, partial=partial, constraints=constraints)


def forced_lengths(controls: Controls | None, batch: int) -> list[int]:
    """The number of forced ids of each of `batch` sentences under `controls`."""
    if controls is None or controls.prefixes is None:
        return [0] * batch
    return [len(p) for p in controls.prefixes]


LONGEST_WORD = 100  # characters: a longer unfinished word is forced as SentencePiece splits it


def completions(pieces: list[str], rest: str) -> list[int]:
    """The ids of the pieces that go on spelling `rest`: each starting with all of it, or a start of it after which
    the remainder can still be spelled, so that no search is led where no piece goes on ([] for a `rest` longer
    than `LONGEST_WORD`)."""
    if len(rest) > LONGEST_WORD:
        return []
    spelled = [False] * len(rest) + [True]  # spelled[j]: rest[j:] can be spelled out
    for j in range(len(rest) - 1, -1, -1):
        tail = rest[j:]
        spelled[j] = any(p and (p.startswith(tail) or (tail.startswith(p) and spelled[j + len(p)])) for p in pieces)
    return [i for i, p in enumerate(pieces) if p and (p.startswith(rest) or (rest.startswith(p) and spelled[len(p)]))]


class Steering:
    """`Controls` over a search's rows: one row per sentence at first, reordered with the search's rows."""

    def __init__(self, controls: Controls, batch: int, device: torch.device):
        lengths = forced_lengths(controls, batch)
        self.forced = torch.full((batch, max(lengths, default=0)), -1, dtype=torch.long)  # (N, P); -1: free
        for row, ids in enumerate(controls.prefixes or []):
            self.forced[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        self.forced = self.forced.to(device)
        self.rest = list(controls.partial) if controls.partial is not None else [""] * batch
        self.controls = controls
        self.singles = torch.tensor([s[0] for s in controls.suppress if len(s) == 1], dtype=torch.long, device=device)
        self.suppress = [torch.tensor(s, dtype=torch.long, device=device) for s in controls.suppress if len(s) > 1]
        self.offset = torch.zeros(batch, device=device)  # (N,): log-probability of the row's forced tokens
        self._allowed: dict[str, Tensor] = {}
        self._now: Tensor | None = None  # (N,): the token forced at this step, -1 where free

    def forced_now(self, generated: int) -> Tensor | None:
        """The token forced on each row at position `generated` (-1: free), or None when no row is forced."""
        if generated >= self.forced.size(1):
            self._now = None
        else:
            column = self.forced[:, generated]
            self._now = column if bool((column >= 0).any()) else None
        return self._now

    def constrain(self, logp: Tensor, prefix: Tensor, forced_logp: Tensor | None) -> None:
        """Mask `logp` (N, V) in place: suppressed sequences, pieces that do not spell a typed word's rest, then
        each forced row down to its forced token at `forced_logp` (N,), its log-probability before any ban."""
        generated = prefix.size(1) - 1  # BOS first
        logp.index_fill_(1, self.singles, NEG_INF)
        for sequence in self.suppress:
            n = sequence.numel()
            if generated >= n - 1:
                follows = (prefix[:, generated - n + 2 :] == sequence[:-1]).all(1)  # (N,)
                logp[follows, sequence[-1]] = NEG_INF
        for row, rest in enumerate(self.rest):
            if rest:
                banned = torch.ones(logp.size(1), dtype=torch.bool, device=logp.device)
                banned[self._completions(rest)] = False
                logp[row].masked_fill_(banned, NEG_INF)
        if self._now is not None and forced_logp is not None:
            rows = (self._now >= 0).nonzero().squeeze(1)
            logp[rows] = NEG_INF
            logp[rows, self._now[rows]] = forced_logp[rows]

    def _completions(self, rest: str) -> Tensor:
        if rest not in self._allowed:
            self._allowed[rest] = torch.tensor(completions(self.controls.pieces or [], rest), dtype=torch.long)
        return self._allowed[rest]

    def advance(self, tokens: Tensor, logprobs: Tensor) -> None:
        """After each row took `tokens` (N,) at `logprobs` (N,): add forced ones to the offset, shorten the rests."""
        if self._now is not None:  # a row that did not take its forced token is dead (-inf): leave its offset
            self.offset += torch.where((self._now >= 0) & (logprobs > NEG_INF), logprobs, 0.0)
        if any(self.rest):
            free = [True] * len(self.rest) if self._now is None else (self._now < 0).tolist()
            for row, token in enumerate(tokens.tolist()):
                if self.rest[row] and free[row]:
                    self.rest[row] = self.controls.rest_after(self.rest[row], token)

    def select(self, rows: Tensor) -> None:
        """Keep `rows` (indices into the current rows, repeats allowed)."""
        self.forced = self.forced.index_select(0, rows)
        self.offset = self.offset.index_select(0, rows)
        if self._now is not None:
            self._now = self._now.index_select(0, rows)
        if any(self.rest):
            self.rest = [self.rest[i] for i in rows.tolist()]
        else:
            self.rest = [""] * rows.numel()
