"""Steering in text: a typed prefix as the ids forced first and the rest of its unfinished last word, suppressed
phrases as id sequences, and the text of a steered hypothesis, which starts with the typed prefix exactly.

A prefix that ends inside a word ("Two dogs pl") forces the pieces of the words before it ("Two dogs") and leaves
the typed characters ("▁pl") for the first searched pieces to spell out, so "pl" may become "play", "plays" or
"pl" + "ay"; a prefix that ends in a space leaves "▁": the next piece starts a word.
"""

from dataclasses import dataclass

from transformer.core.special_ids import UNK_ID
from transformer.data.tokenizer import Tokenizer
from transformer.decoding.search_state import Hypothesis
from transformer.decoding.steering import SPACE, completions


def target_pieces(tokenizer: Tokenizer) -> list[str]:
    """The target pieces by id, "" for those that spell no text (control, unknown, byte and tag pieces)."""
    sp, tags = tokenizer.tgt, tokenizer.tgt_tag_ids
    silent = [sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i) or i in tags for i in range(sp.get_piece_size())]
    return ["" if no_text else sp.id_to_piece(i) for i, no_text in enumerate(silent)]


@dataclass(frozen=True)
class TypedPrefix:
    """A prefix as typed (`text`), the target ids it forces and the characters left to spell ("" none)."""

    text: str
    forced: list[int]
    rest: str


def typed_prefix(tokenizer: Tokenizer, text: str, pieces: list[str] | None) -> TypedPrefix:
    """`text` as forced ids and a rest to spell (see the module docstring); without `pieces` (an engine that
    cannot spell one), or where no piece spells the last word, all of it is forced as SentencePiece splits it."""
    if not text.strip():
        return TypedPrefix(text, [], "")
    last = "" if text[-1].isspace() else text.split()[-1]
    head = text[: len(text) - len(last)]
    rest = tokenizer.tgt.normalize(last) if last else SPACE  # "▁pl": SentencePiece's form, with its space
    if pieces is None or not completions(pieces, rest):
        return TypedPrefix(text, tokenizer.encode_tgt([text])[0], "")
    return TypedPrefix(text, tokenizer.encode_tgt([head])[0] if head.strip() else [], rest)


def suppressed(tokenizer: Tokenizer, phrases: list[str], ban_unk: bool) -> list[list[int]]:
    """The id sequences of `phrases` as SentencePiece splits them in a sentence, and the unknown piece if `ban_unk`."""
    return tokenizer.encode_tgt(phrases) + ([[UNK_ID]] if ban_unk else [])


def steered_text(tokenizer: Tokenizer, prefix: TypedPrefix, hyp: Hypothesis) -> str:
    """The text of `hyp`, searched after `prefix`: the prefix as typed, then what the searched pieces add to it."""
    forced, searched = hyp.tokens[: hyp.forced], hyp.tokens[hyp.forced :]
    if forced:
        head, whole = tokenizer.decode_tgt([forced, forced + searched])
        added = whole[len(head) :] if whole.startswith(head) else " " + tokenizer.decode_tgt([searched])[0]
    else:
        added = " " + tokenizer.decode_tgt([searched])[0]  # a rest starts a word: SentencePiece drops its space
    typed = prefix.rest.replace(SPACE, " ")
    if not added.startswith(typed):  # stopped by the output limit before the typed word was spelled
        return prefix.text
    return prefix.text + added[len(typed) :]


class SteeringError(ValueError):
    """What is wrong with one sentence's steering (its constraints): the sentence is left untranslated."""


def encode_constraints(
    tokenizer: Tokenizer, given: list[str], glossary: list[str], suppress: list[list[int]], beam_size: int
) -> list[list[int]]:
    """The id phrases of a sentence's constraints: those `given` for it, then its `glossary` terms (once each).

    Raises `SteeringError` for an empty or repeated constraint, one of only unknown pieces, one holding a
    suppressed sequence, or more phrases than a beam of `beam_size` keeps apart (at most beam_size - 1).
    """
    for i, phrase in enumerate(given):
        if not phrase.strip():
            raise SteeringError(f"constraint {i + 1} is empty")
        if phrase in given[:i]:
            raise SteeringError(f"constraint {phrase!r} is given twice")
    phrases = list(dict.fromkeys([*given, *glossary]))
    if len(phrases) >= beam_size:
        raise SteeringError(f"{len(phrases)} constraints need decoding.beam_size={len(phrases) + 1} or more")
    encoded = tokenizer.encode_tgt(phrases) if phrases else []
    for phrase, ids in zip(phrases, encoded):
        if all(i == UNK_ID or tokenizer.tgt.id_to_piece(i) == SPACE for i in ids):
            raise SteeringError(f"constraint {phrase!r} has only pieces the model does not know")
        for sequence in suppress:
            if any(ids[j : j + len(sequence)] == sequence for j in range(len(ids))):
                raise SteeringError(f"constraint {phrase!r} holds a suppressed sequence (decoding.suppress, ban_unk)")
    return encoded
