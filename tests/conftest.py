"""Shared fixtures: a tiny random model and a tiny parallel corpus written to disk."""

import gzip
import random
from pathlib import Path

import pytest
import torch

from transformer.model import Transformer

WORDS_FR = ["un", "chien", "chat", "homme", "femme", "court", "mange", "dort", "rouge", "bleu", "dans", "le", "parc"]
WORDS_EN = ["a", "dog", "cat", "man", "woman", "runs", "eats", "sleeps", "red", "blue", "in", "the", "park"]


def tiny_model(seed: int = 0, vocab: int = 40, dropout: float = 0.0, **kwargs) -> Transformer:
    torch.manual_seed(seed)
    args = dict(d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=dropout)
    args.update(kwargs)
    return Transformer(vocab, vocab, pad_id=0, **args).eval()


def rebuilt(model: Transformer, **kwargs) -> Transformer:
    """A separately built tiny model (`kwargs` as for `tiny_model`) holding `model`'s current weights."""
    copy = tiny_model(seed=123, **kwargs)
    copy.load_state_dict(model.state_dict())
    return copy


def write_corpus(directory: Path, name: str, n: int, seed: int, gz: bool = False) -> tuple[Path, Path]:
    """A word-for-word toy translation task: n sentence pairs in `name`.fr/.en."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        idx = [rng.randrange(len(WORDS_FR)) for _ in range(rng.randint(2, 7))]
        src.append(" ".join(WORDS_FR[i] for i in idx))
        tgt.append(" ".join(WORDS_EN[i] for i in idx))
    paths = []
    for lines, lang in ((src, "fr"), (tgt, "en")):
        path = directory / (f"{name}.{lang}.gz" if gz else f"{name}.{lang}")
        text = "".join(line + "\n" for line in lines).encode()
        path.write_bytes(gzip.compress(text) if gz else text)
        paths.append(path)
    return paths[0], paths[1]


@pytest.fixture
def corpus(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    return {
        "train": write_corpus(tmp_path, "train", 300, seed=1, gz=True),
        "val": write_corpus(tmp_path, "val", 20, seed=2),
        "test": write_corpus(tmp_path, "test", 20, seed=3),
    }
