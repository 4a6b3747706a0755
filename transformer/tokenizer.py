"""SentencePiece subword models for the source and target side.

Ids: 0 = <pad>, 1 = <s> (BOS), 2 = </s> (EOS), 3 = <unk>; subwords follow.
With a joint vocabulary one model serves both sides.
"""

import io
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

import sentencepiece as spm

from transformer.config import TokenizerConfig
from transformer.errors import UserError

log = logging.getLogger(__name__)

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
# SentencePiece's list calls start a pool of threads each time; below this many sentences a loop of one-sentence
# calls is faster (one sentence: 4 µs against 110 µs through the pool, 32: 0.14 against 0.18 ms, 128: 1.0 against
# 0.6 ms on 2 cores; scripts/benchmark_tokenizer.py).
POOL_FROM = 64


def _each(call, items: list) -> list:
    """`call` (a SentencePiece encode or decode) on every item: one by one, or through its pool for large lists."""
    if len(items) < POOL_FROM:
        return [call(item) for item in items]
    return call(items)


def train_sentencepiece(sentences: Iterator[str], cfg: TokenizerConfig) -> bytes:
    """Train a SentencePiece model on `sentences`; returns the serialized model.

    `vocab_size` is a ceiling: a corpus too small for it gets a smaller vocabulary.
    """
    model = io.BytesIO()
    try:
        _train(sentences, model, cfg)
    except RuntimeError as err:  # SentencePiece's errors about the settings, e.g. a vocabulary below the characters
        raise UserError(
            f"SentencePiece cannot train with data.tokenizer.vocab_size={cfg.vocab_size} "
            f"({str(err).strip().splitlines()[-1].rsplit('] ', 1)[-1]}); raise data.tokenizer.vocab_size "
            "(or lower data.tokenizer.character_coverage)"
        ) from None
    return model.getvalue()


def _train(sentences: Iterator[str], model: io.BytesIO, cfg: TokenizerConfig) -> None:
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
    )


class Tokenizer:
    """Source and target SentencePiece processors built from serialized models."""

    def __init__(self, src_model: bytes, tgt_model: bytes):
        self.src_model, self.tgt_model = src_model, tgt_model
        self.src = spm.SentencePieceProcessor(model_proto=src_model)
        self.tgt = self.src if tgt_model == src_model else spm.SentencePieceProcessor(model_proto=tgt_model)

    @property
    def joint(self) -> bool:
        return self.src is self.tgt

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size()

    def encode_src(self, sentences: Iterable[str]) -> list[list[int]]:
        """Subword ids of source sentences, without BOS/EOS."""
        return _each(self.src.encode, list(sentences))

    def encode_tgt(self, sentences: Iterable[str]) -> list[list[int]]:
        """Subword ids of target sentences, without BOS/EOS."""
        return _each(self.tgt.encode, list(sentences))

    def sample_pairs(
        self, src: list[str], tgt: list[str], dropout: float, seeds: tuple[int, int]
    ) -> tuple[list[list[int]], list[list[int]]]:
        """Subword ids of sentence pairs under BPE-dropout, the same for the same `seeds` (source, target)."""
        options = {"enable_sampling": True, "alpha": dropout, "num_threads": 1}
        # SentencePiece seeds a thread's generator from its global seed when the thread first samples;
        # each batch encode runs on a fresh worker thread, so the seed set just before it decides the draw.
        spm.set_random_generator_seed(seeds[0])
        src_ids = self.src.encode(src, **options)
        spm.set_random_generator_seed(seeds[1])
        return src_ids, self.tgt.encode(tgt, **options)

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
