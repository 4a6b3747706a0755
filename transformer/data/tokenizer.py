"""SentencePiece subword models for the source and target side.

Ids: 0 = <pad>, 1 = <s> (BOS), 2 = </s> (EOS), 3 = <unk>; then the corpus tags (<NAME>, user-defined pieces
reserved when the model is trained); subwords follow. With a joint vocabulary one model serves both sides.
A tag is put before a sentence's ids, never read from text: text that spells a tag gets the pieces of its characters.
"""

import functools
import io
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from transformer.core.config import TokenizerConfig
from transformer.core.errors import UserError
from transformer.core.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID

log = logging.getLogger(__name__)

# SentencePiece's list calls start a pool of threads each time; below this many sentences a loop of one-sentence
# calls is faster (one sentence: 4 µs against 110 µs through the pool, 32: 0.14 against 0.18 ms, 128: 1.0 against
# 0.6 ms on 2 cores; scripts/benchmark_tokenizer.py).
POOL_FROM = 64


def _each(call, items: list, threads: int = -1) -> list:
    """`call` (a SentencePiece encode or decode) on every item: one by one, or through its pool of `threads` threads
    (-1: one per core) for large lists."""
    if len(items) < POOL_FROM:
        return [call(item) for item in items]
    return call(items, num_threads=threads)


def tag_piece(tag: str) -> str:
    """The piece of a corpus tag: <NAME>."""
    return f"<{tag}>"


def train_sentencepiece(sentences: Iterator[str], cfg: TokenizerConfig, tags: Iterable[str] = ()) -> bytes:
    """Train a SentencePiece model on `sentences`, with the pieces of `tags` reserved; returns the serialized model.

    `vocab_size` is a ceiling: a corpus too small for it gets a smaller vocabulary.
    """
    model = io.BytesIO()
    try:
        _train(sentences, model, cfg, [tag_piece(t) for t in tags])
    except RuntimeError as err:  # SentencePiece's errors about the settings, e.g. a vocabulary below the characters
        raise UserError(
            f"SentencePiece cannot train with data.tokenizer.vocab_size={cfg.vocab_size} "
            f"({str(err).strip().splitlines()[-1].rsplit('] ', 1)[-1]}); raise data.tokenizer.vocab_size "
            "(or lower data.tokenizer.character_coverage)"
        ) from None
    return model.getvalue()


def _train(sentences: Iterator[str], model: io.BytesIO, cfg: TokenizerConfig, symbols: list[str]) -> None:
    reserved = {"user_defined_symbols": symbols} if symbols else {}
    spm.SentencePieceTrainer.train(
        sentence_iterator=sentences,
        model_writer=model,
        vocab_size=cfg.vocab_size,
        model_type=cfg.model_type,
        character_coverage=cfg.character_coverage,
        input_sentence_size=cfg.input_sentence_size,
        shuffle_input_sentence=True,
        hard_vocab_limit=False,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        unk_id=UNK_ID,
        minloglevel=2,
        **reserved,
    )


@functools.lru_cache(maxsize=8)  # a Tokenizer is built per batch when a corpus is tokenized: parse each model once
def _user_defined(model: bytes) -> tuple[tuple[int, str], ...]:
    """The user-defined pieces (the tags) of a serialized model: (id, piece)."""
    proto = sentencepiece_model_pb2.ModelProto.FromString(model)
    kind = sentencepiece_model_pb2.ModelProto.SentencePiece.USER_DEFINED
    return tuple((i, p.piece) for i, p in enumerate(proto.pieces) if p.type == kind)


class _Tags:
    """One side's tag pieces: their ids, and the ids of their characters for text that merely spells one."""

    def __init__(self, processor: spm.SentencePieceProcessor, model: bytes):
        self.ids = dict(_user_defined(model))
        self.spelled = {i: [processor.piece_to_id(c) for c in piece] for i, piece in self.ids.items()}
        self.below = max(self.ids, default=-1) + 1  # every tag id is below this

    def untagged(self, ids: list[list[int]]) -> list[list[int]]:
        """`ids` of text with any tag piece replaced by its characters' pieces (only text spelling a tag has one)."""
        if not self.ids:
            return ids
        return [[j for t in x for j in self.spelled.get(t, (t,))] if x and min(x) < self.below else x for x in ids]


WORD_START = "\u2581"  # SentencePiece's mark of a piece that starts a word


def word_index(pieces: list[str]) -> list[int]:
    """The word (0-based, as whitespace splits the text) each piece belongs to: a piece that starts with ▁ starts a
    word; pieces before the first word (a corpus tag) belong to none (-1)."""
    words, word = [], -1
    for piece in pieces:
        word += piece.startswith(WORD_START)
        words.append(word)
    return words


class Tokenizer:
    """Source and target SentencePiece processors built from serialized models."""

    def __init__(self, src_model: bytes, tgt_model: bytes):
        self.src_model, self.tgt_model = src_model, tgt_model
        self.src = spm.SentencePieceProcessor(model_proto=src_model)
        self.tgt = self.src if tgt_model == src_model else spm.SentencePieceProcessor(model_proto=tgt_model)
        self._src_tags = _Tags(self.src, src_model)
        self._tgt_tags = self._src_tags if self.joint else _Tags(self.tgt, tgt_model)

    @property
    def joint(self) -> bool:
        return self.src is self.tgt

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size()

    def piece_table(self, side: str) -> list[str]:
        """The pieces of the `side` ("src" or "tgt") vocabulary by id."""
        sp = self.src if side == "src" else self.tgt
        return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]

    @property
    def tags(self) -> tuple[str, ...]:
        """The corpus tags the source vocabulary holds, by name."""
        return tuple(piece[1:-1] for piece in self._src_tags.ids.values())

    @property
    def tgt_tag_ids(self) -> frozenset[int]:
        """The ids of the tag pieces in the target vocabulary (a joint one holds the source's)."""
        return frozenset(self._tgt_tags.ids)

    def tag_prefix(self, tag: str) -> list[int]:
        """The ids that start a source sentence translated "as" the corpus tagged `tag`: [] for "" (no tag)."""
        if not tag:
            return []
        if tag not in self.tags:
            have = f"its tags: {', '.join(self.tags)}" if self.tags else "it has no tags"
            raise UserError(f"tag {tag!r} is not in this model's vocabulary ({have})")
        return [self.src.piece_to_id(tag_piece(tag))]

    def same_models(self, other: "Tokenizer") -> bool:
        """True when `other` holds the same SentencePiece model(s), so it gives the same ids."""
        return (self.src_model, self.tgt_model) == (other.src_model, other.tgt_model)

    def encode_src(self, sentences: Iterable[str], tag: str = "", threads: int = -1) -> list[list[int]]:
        """Subword ids of source sentences, without BOS/EOS; with `tag`, its piece first (`threads`: as `_each`)."""
        ids = self._src_tags.untagged(_each(self.src.encode, list(sentences), threads))
        prefix = self.tag_prefix(tag)
        return [prefix + x for x in ids] if prefix else ids

    def encode_tgt(self, sentences: Iterable[str], threads: int = -1) -> list[list[int]]:
        """Subword ids of target sentences, without BOS/EOS (`threads`: as `_each`)."""
        return self._tgt_tags.untagged(_each(self.tgt.encode, list(sentences), threads))

    def sample_pairs(
        self, src: list[str], tgt: list[str], dropout: float, seeds: tuple[int, int]
    ) -> tuple[list[list[int]], list[list[int]]]:
        """Subword ids of sentence pairs under BPE-dropout, the same for the same `seeds` (source, target)."""
        options = {"enable_sampling": True, "alpha": dropout, "num_threads": 1}
        # SentencePiece seeds a thread's generator from its global seed when the thread first samples;
        # each batch encode runs on a fresh worker thread, so the seed set just before it decides the draw.
        spm.set_random_generator_seed(seeds[0])
        src_ids = self._src_tags.untagged(self.src.encode(src, **options))
        spm.set_random_generator_seed(seeds[1])
        return src_ids, self._tgt_tags.untagged(self.tgt.encode(tgt, **options))

    def encode_arrays(self, sentences: list[str], side: str, tag: str = "", threads: int = -1):
        """Ids of many sentences of `side` ("src" or "tgt") for storage, as `encode_src`/`encode_tgt` give them:
        (lengths (N,) int64, the concatenated ids (sum of lengths,) int32), with no Python object per id."""
        processor, tags = (self.src, self._src_tags) if side == "src" else (self.tgt, self._tgt_tags)
        arrays = processor.encode(sentences, return_type="numpy", num_threads=threads) if sentences else []
        if tags.ids:  # text that merely spells a tag: its characters' pieces, as encode_src gives them
            arrays = [
                np.asarray(tags.untagged([a.tolist()])[0], np.int32) if a.size and a.min() < tags.below else a
                for a in arrays
            ]
        lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
        values = np.concatenate(arrays) if arrays else np.zeros(0, np.int32)
        prefix = self.tag_prefix(tag) if side == "src" else []
        if not prefix:
            return lengths, values
        starts = np.cumsum(lengths + 1) - (lengths + 1)  # (N,) where each tagged sentence starts
        tagged = np.empty(len(values) + len(lengths), dtype=np.int32)
        is_tag = np.zeros(len(tagged), dtype=bool)
        is_tag[starts] = True
        tagged[is_tag], tagged[~is_tag] = prefix[0], values
        return lengths + 1, tagged

    def decode_tgt(self, ids: Iterable[list[int]]) -> list[str]:
        """Detokenized target text."""
        return _each(self.tgt.decode, [list(x) for x in ids])

    def save(self, directory: Path) -> None:
        """Write `spm.model` (joint) or `spm.src.model` and `spm.tgt.model`."""
        if self.joint:
            (directory / "spm.model").write_bytes(self.src_model)
        else:
            (directory / "spm.src.model").write_bytes(self.src_model)
            (directory / "spm.tgt.model").write_bytes(self.tgt_model)

    @classmethod
    def load(cls, directory: Path) -> "Tokenizer":
        joint = directory / "spm.model"
        if joint.exists():
            model = joint.read_bytes()
            return cls(model, model)
        return cls((directory / "spm.src.model").read_bytes(), (directory / "spm.tgt.model").read_bytes())
