"""Both model families and their inference copies are what the search needs: `interface.Seq2SeqModel`."""

from types import SimpleNamespace

import pytest
import torch

from transformer.core.config import Family, ModelConfig, RNNConfig, choices
from transformer.fast_inference import inference_copy
from transformer.models.factory import FAMILIES, build_model
from transformer.models.interface import SearchCache, Seq2SeqModel

VOCAB = SimpleNamespace(src_vocab_size=20, tgt_vocab_size=20, joint=True)


def test_every_family_has_a_class():
    assert tuple(FAMILIES) == choices(Family)


@pytest.mark.parametrize("family", choices(Family))
def test_families_and_inference_copies_are_seq2seq_models(family):
    small = RNNConfig(embedding_dim=8, encoder_hidden=8, decoder_hidden=8, attention_dim=8)
    sizes = dict(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
    config = ModelConfig(family=family, rnn=small, **sizes)
    model = build_model(config, VOCAB)
    src = torch.tensor([[5, 6, 2]])
    for candidate in (model, inference_copy(model)):
        assert isinstance(candidate, Seq2SeqModel)
        with torch.no_grad():
            memory, _ = candidate.eval().encode(src)
            assert isinstance(candidate.init_cache(memory, 2, 4), SearchCache)
    assert not isinstance(torch.nn.Linear(2, 2), Seq2SeqModel)
