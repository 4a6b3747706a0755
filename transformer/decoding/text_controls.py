"""A translator's steering of one call (`decoding/steering.py` in text): each sentence's typed prefix and constraint
phrases (given, and from `cfg.glossary`), and `cfg`'s suppressed phrases and alternatives, checked sentence by
sentence and handed to the search batch by batch as `steering.Controls`."""

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from transformer.core.config import DecodingConfig
from transformer.data.tokenizer import Tokenizer
from transformer.decoding.glossary import load_glossary
from transformer.decoding.search_state import SearchOptions
from transformer.decoding.steered_text import SteeringError, TypedPrefix, encode_constraints, suppressed, typed_prefix
from transformer.decoding.steering import Controls

log = logging.getLogger(__name__)

Steer = Callable[[list[int]], Controls | None]  # the controls of a batch of sentences (indices into a call's)


@dataclass
class TextControls:
    """The steering of a translator with settings `cfg` whose engine takes sources of at most `max_positions` ids;
    `pieces`: the target pieces by id where the engine spells an unfinished word (`steered_text.target_pieces`)."""

    tokenizer: Tokenizer
    cfg: DecodingConfig
    max_positions: int
    pieces: list[str] | None

    def typed(self, prefix: str) -> TypedPrefix:
        """`prefix` as the engine forces it: the ids forced and the rest of an unfinished word to spell."""
        return typed_prefix(self.tokenizer, prefix, self.pieces)

    @functools.cached_property
    def suppressed(self) -> list[list[int]]:
        """`cfg`'s suppressed phrases (and the unknown piece with `ban_unk`) as id sequences, tokenized once."""
        return suppressed(self.tokenizer, list(self.cfg.suppress), self.cfg.ban_unk)

    def phrases(self, sentence: str, given: list[str]) -> list[list[int]]:
        """The constraint phrases of `sentence` as ids: `given`, then its `cfg.glossary` terms. Raises
        `SteeringError` where they are wrong."""
        glossary = load_glossary(self.cfg.glossary) if self.cfg.glossary else None
        terms = glossary.terms(sentence) if glossary else []
        return encode_constraints(self.tokenizer, given, terms, self.suppressed, self.cfg.beam_size)

    def check_room(
        self, source_length: int, typed: TypedPrefix | None, phrases: list[list[int]] | None, options: SearchOptions
    ) -> None:
        """Raise `SteeringError` where a source of `source_length` ids has too low an output limit for the prefix,
        the phrases, and a piece after the prefix (two with alternatives), EOS included."""
        needed = (len(typed.forced) if typed else 0) + sum(map(len, phrases or [])) + 1 + bool(self.cfg.alternatives)
        length = torch.tensor([source_length + 1], dtype=torch.long)  # EOS included
        limit = int(options.output_limits(length, self.max_positions)[0])
        if needed > limit:
            raise SteeringError(
                f"its prefix and constraints need {needed} pieces, more than its output limit of {limit} "
                "(decoding.max_len_a, max_len_b)"
            )

    def prepare(
        self,
        sentences: list[str],
        ids: list[list[int]],
        todo: list[int],
        prefixes: list[str] | None,
        constraints: list[list[str]] | None,
        options: SearchOptions,
    ) -> tuple[Steer, list[int]]:
        """The controls of a call's batches, and `todo` (indices into `sentences`, whose source ids are `ids`)
        without the sentences whose prefix and constraints are wrong or do not fit (each logged)."""
        typed = None if prefixes is None else [self.typed(p) for p in prefixes]
        look = constraints is not None or bool(self.cfg.glossary)
        phrases: list[list[list[int]]] | None = [[] for _ in sentences] if look else None
        if typed is None and phrases is None:
            return self._steer(None, None), todo
        kept = []
        for i in todo:
            try:
                if phrases is not None:
                    phrases[i] = self.phrases(sentences[i], list(constraints[i]) if constraints else [])
                self.check_room(len(ids[i]), typed[i] if typed else None, phrases[i] if phrases else None, options)
            except SteeringError as err:
                log.error("sentence %d: %s; it is left untranslated", i + 1, err)
                continue
            kept.append(i)
        return self._steer(typed, phrases), kept

    def _steer(self, typed: list[TypedPrefix] | None, phrases: list[list[list[int]]] | None) -> Steer:
        """The controls of a batch: the prefixes `typed` and constraint `phrases` of its sentences, and `cfg`'s
        suppressed phrases and alternatives; None when nothing steers."""
        suppress, alternatives = self.suppressed, self.cfg.alternatives
        if typed is None and phrases is None and not suppress and not alternatives:
            return lambda rows: None

        def steer(rows: list[int]) -> Controls:
            prefixes = None if typed is None else [typed[i].forced for i in rows]
            partial = None if typed is None or self.pieces is None else [typed[i].rest for i in rows]
            found = None if phrases is None else [phrases[i] for i in rows]
            return Controls(prefixes, partial, suppress, self.pieces, alternatives, constraints=found)

        return steer
