import torch

from tests.conftest import tiny_model
from transformer.model import Transformer


def test_output_shapes_and_dtype():
    model = Transformer(50, 60, d_model=32, n_heads=4, n_encoder_layers=1, n_decoder_layers=2, d_ff=64)
    logits = model(torch.randint(3, 50, (3, 7)), torch.randint(3, 60, (3, 5)))
    assert logits.shape == (3, 5, 60) and logits.dtype == torch.float32


def test_sentence_alone_equals_sentence_in_padded_batch():
    model = tiny_model()
    src = torch.tensor([[5, 6, 7, 8, 2, 0, 0], [9, 10, 11, 12, 13, 14, 2], [4, 2, 0, 0, 0, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 0, 0], [1, 7, 8, 9, 10], [1, 3, 0, 0, 0]])
    batched = model(src, tgt)
    for i, (s_len, t_len) in enumerate([(5, 3), (7, 5), (2, 2)]):
        alone = model(src[i : i + 1, :s_len], tgt[i : i + 1, :t_len])
        torch.testing.assert_close(batched[i : i + 1, :t_len], alone, atol=1e-5, rtol=1e-5)


def test_embeddings_are_tied_when_joint():
    model = tiny_model(joint_vocab=True)
    assert model.output.weight is model.tgt_embed.weight is model.src_embed.weight
    separate = tiny_model(joint_vocab=False)
    assert separate.output.weight is separate.tgt_embed.weight
    assert separate.src_embed.weight is not separate.tgt_embed.weight


def test_post_norm_variant_runs_and_differs():
    pre, post = tiny_model(pre_norm=True), tiny_model(pre_norm=False)
    src, tgt = torch.randint(3, 40, (2, 5)), torch.randint(3, 40, (2, 4))
    assert post(src, tgt).shape == pre(src, tgt).shape
    assert not torch.allclose(post(src, tgt), pre(src, tgt))
