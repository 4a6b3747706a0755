"""Our model sizes as `transformer-train` builds them, and Hugging Face MarianMT of the same sizes: the reference
of the speed benchmarks and of scripts/train_marian_reference.py. MarianMT needs the `bench` extra
(transformers), imported only when one is built."""

import torch.nn.functional as F

from transformer.core import presets
from transformer.core.config import ModelConfig
from transformer.core.special_ids import BOS_ID, EOS_ID, PAD_ID

SIZES = ("small", "base")  # configs/model/<size>.yaml


def model_config(size: str) -> ModelConfig:
    """The model settings of `configs/model/<size>.yaml` (over ModelConfig's defaults), as training reads them."""
    return presets.compose("model", size)


def marian(size: str, vocab: int, dropout: float):
    """A randomly initialised MarianMT of `size` over our joint vocabulary (and our special ids), or None without
    `transformers`.

    Set as the Helsinki-NLP opus-mt models are (swish, embeddings scaled by sqrt(d_model)); the library's bare
    defaults (gelu, unscaled embeddings under sinusoidal positions of norm ~sqrt(d/2)) train far more slowly."""
    try:
        from transformers import MarianConfig, MarianMTModel
    except ImportError:
        return None
    cfg = model_config(size)
    d, h, layers, ff = cfg.d_model, cfg.n_heads, cfg.n_encoder_layers, cfg.d_ff
    config = MarianConfig(
        vocab_size=vocab,
        d_model=d,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=h,
        decoder_attention_heads=h,
        encoder_ffn_dim=ff,
        decoder_ffn_dim=ff,
        max_position_embeddings=512,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=BOS_ID,
        forced_eos_token_id=None,
        dropout=dropout,
        activation_function="swish",
        scale_embedding=True,
    )
    return MarianMTModel(config)


def marian_loss(model, batch, label_smoothing: float):
    """Mean label-smoothed cross-entropy of MarianMT on one of our padded batches (teacher forcing)."""
    logits = model(input_ids=batch.src, attention_mask=batch.src != PAD_ID, decoder_input_ids=batch.tgt_in).logits
    return F.cross_entropy(
        logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID, label_smoothing=label_smoothing
    )
