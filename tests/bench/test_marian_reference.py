"""The benchmarks' reference: our sizes as training composes them, and MarianMT models of the same sizes."""

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tests.conftest import write_corpus
from transformer.bench.marian_reference import SIZES, marian, marian_loss, model_config
from transformer.cli import CONFIG_PATH
from transformer.core.special_ids import BOS_ID, PAD_ID
from transformer.data.batching import Batch


@pytest.mark.parametrize("size", SIZES)
def test_sizes_are_what_training_composes(size, tmp_path):
    src, tgt = write_corpus(tmp_path, "train", 2, 1)
    files = ["data=files", f"data.train.src={src}", f"data.train.tgt={tgt}", f"data.val.src={src}"]
    with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
        cfg = compose("train", overrides=[*files, f"data.val.tgt={tgt}", f"model={size}"])
    assert OmegaConf.structured(model_config(size)) == cfg.model


def test_marian_has_our_size_and_ids():
    pytest.importorskip("transformers")
    model = marian("small", vocab=50, dropout=0.0)
    ours = model_config("small")
    assert (model.config.d_model, model.config.encoder_layers, model.config.decoder_ffn_dim) == (
        ours.d_model,
        ours.n_encoder_layers,
        ours.d_ff,
    )
    assert (model.config.pad_token_id, model.config.decoder_start_token_id) == (PAD_ID, BOS_ID)
    src = torch.tensor([[5, 6, 2, PAD_ID]])
    tgt = torch.tensor([[BOS_ID, 7, 8]])
    batch = Batch(src=src, tgt_in=tgt, tgt_out=torch.tensor([[7, 8, 2]]))
    loss = marian_loss(model, batch, label_smoothing=0.0)
    assert loss.ndim == 0 and torch.isfinite(loss) and loss > 0
