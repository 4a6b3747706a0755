"""The RNN family (Bahdanau et al. 2014) through the same search, checkpoints and configs as the Transformer; the
search properties it shares with every model are in test_conformance.py."""

import pytest
import torch
from omegaconf import OmegaConf

from tests.core.test_config import make
from tests.decoding.test_decoding import BOS, PAD, batch_src
from transformer.cli.checks import check_config
from transformer.core.config import ModelConfig, RNNConfig
from transformer.core.errors import UserError
from transformer.fast_inference import inference_copy
from transformer.models.factory import build_model, model_config
from transformer.models.rnn import RNNModel


def tiny_rnn(seed: int = 0, vocab: int = 40, tie: bool = True, **rnn) -> RNNModel:
    torch.manual_seed(seed)
    sizes = dict(embedding_dim=16, encoder_hidden=12, decoder_hidden=20, attention_dim=10, **rnn)
    config = ModelConfig(family="rnn", dropout=0.0, tie_embeddings=tie, rnn=RNNConfig(**sizes))
    return RNNModel(vocab, vocab, config, pad_id=PAD, joint_vocab=True).eval()


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_padding_does_not_change_the_encoder_states(cell):
    model, src = tiny_rnn(seed=2, cell=cell, encoder_layers=2), batch_src(4)
    wider = torch.cat([src, torch.full((4, 5), PAD)], dim=1)
    with torch.no_grad():
        memory, mask = model.encode(src)
        more, _ = model.encode(wider)
        torch.testing.assert_close(more[:, : src.size(1)], memory, atol=1e-6, rtol=0)
        assert not more[:, src.size(1) :].any() and not memory[~mask].any()
        for i in range(4):
            alone, _ = model.encode(src[i : i + 1, : int(mask[i].sum())])
            torch.testing.assert_close(alone[0], memory[i, : alone.size(1)], atol=1e-6, rtol=0)


def test_attention_weights_cover_the_real_source_tokens_only():
    model, src = tiny_rnn(seed=1), batch_src()
    tgt_in = torch.cat([torch.full((4, 1), BOS), torch.randint(3, 40, (4, 5))], dim=1)
    weights = model.cross_attention(src, tgt_in)
    assert weights.shape == (1, 4, 1, 6, src.size(1))
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 4, 1, 6))
    assert not weights[0, :, 0].masked_select((src == PAD)[:, None, :].expand(-1, 6, -1)).any()


def test_the_inference_copy_gives_the_same_logits():
    model, src = tiny_rnn(seed=4), batch_src()
    tgt_in = torch.randint(3, 40, (4, 6))
    with torch.no_grad():
        torch.testing.assert_close(inference_copy(model)(src, tgt_in), model(src, tgt_in), atol=1e-5, rtol=1e-5)


def test_tied_and_untied_output_embeddings():
    tied, untied = tiny_rnn(), tiny_rnn(tie=False)
    assert tied.output.weight is tied.tgt_embed.weight and tied.src_embed is tied.tgt_embed
    assert untied.output.weight is not untied.tgt_embed.weight


def test_model_rnn_config_builds_the_rnn_from_a_checkpoint_mapping():
    cfg = make("train", ["model=rnn", "model.rnn.cell=lstm"])
    check_config(cfg)
    tokenizer = type("Tok", (), dict(src_vocab_size=50, tgt_vocab_size=50, joint=True))()
    model = build_model(OmegaConf.create(OmegaConf.to_yaml(cfg.model)), tokenizer)
    assert isinstance(model, RNNModel) and isinstance(model.encoder, torch.nn.LSTM)
    old = {k: v for k, v in OmegaConf.to_container(make("train").model).items() if k not in ("family", "rnn")}
    assert model_config(old).family == "transformer"  # checkpoints from before the RNN family


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.family=lstm", "model.family='lstm' is not one of transformer, rnn"),
        ("model.rnn.cell=rnn", "model.rnn.cell='rnn' is not one of gru, lstm"),
        ("model.rnn.attention=general", "model.rnn.attention='general' is not one of additive, dot"),
        ("model.rnn.decoder_layers=0", "model.rnn.decoder_layers=0 must be at least 1"),
    ],
)
def test_bad_rnn_settings_are_refused_in_one_line(override, message):
    with pytest.raises(UserError, match=message) as err:
        check_config(make("train", ["model=rnn", *override.split()]))
    assert "\n" not in str(err.value)
