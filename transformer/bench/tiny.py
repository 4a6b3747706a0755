"""A tiny random checkpoint on disk over a few test words: what the tests and the benchmarks that measure a command,
not a model, translate with."""

import dataclasses
from pathlib import Path

import torch
from omegaconf import OmegaConf

from transformer.core.config import ModelConfig, RNNConfig, TokenizerConfig
from transformer.data.tokenizer import Tokenizer, train_sentencepiece
from transformer.models.factory import build_model
from transformer.runs.checkpoint import save_checkpoint

WORDS_FR = ["un", "chien", "chat", "homme", "femme", "court", "mange", "dort", "rouge", "bleu", "dans", "le", "parc"]
WORDS_EN = ["a", "dog", "cat", "man", "woman", "runs", "eats", "sleeps", "red", "blue", "in", "the", "park"]


def write_checkpoint(
    path: Path, family: str = "transformer", seed: int = 0, d_model: int = 32, tags: tuple[str, ...] = (), **meta
) -> Path:
    """A random tiny model (a Transformer, or Bahdanau's RNN) with a joint SentencePiece vocabulary of the test
    words (and corpus `tags`): fast, deterministic; `meta` (default step=7) goes into the file."""
    sentences = [" ".join(WORDS_FR[i:] + WORDS_EN[:i]) for i in range(len(WORDS_FR))] * 5
    proto = train_sentencepiece(iter(sentences), TokenizerConfig(vocab_size=60), tags)
    tokenizer = Tokenizer(proto, proto)
    rnn = RNNConfig(embedding_dim=16, encoder_hidden=16, decoder_hidden=32, attention_dim=16)
    cfg = ModelConfig(
        family=family,
        d_model=d_model,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        max_positions=64,
        rnn=rnn,
    )
    torch.manual_seed(seed)
    model = build_model(cfg, tokenizer).eval()
    save_checkpoint(
        path, model, tokenizer, OmegaConf.create({"model": dataclasses.asdict(cfg)}), **(meta or {"step": 7})
    )
    return path
