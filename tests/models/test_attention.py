import torch

from tests.conftest import tiny_model
from transformer.models.attention import (
    MultiHeadAttention,
    attention_reference,
    attention_weights,
    causal_mask,
    padding_mask,
)


def qkv(b=2, h=4, t=6, s=7, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, h, t, d, generator=g),
        torch.randn(b, h, s, d, generator=g),
        torch.randn(b, h, s, d, generator=g),
    )


def test_fast_path_equals_reference_with_padding_mask():
    q, k, v = qkv()
    tokens = torch.tensor([[5, 6, 7, 8, 9, 0, 0], [5, 6, 7, 8, 9, 10, 11]])
    mask = padding_mask(tokens, pad_id=0)
    fast = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(fast, attention_reference(q, k, v, mask), atol=1e-5, rtol=1e-5)


def test_module_causal_path_equals_reference():
    attn = MultiHeadAttention(32, 4).eval()
    x = torch.randn(3, 5, 32)
    q, k, v = attn.project_qkv(x)
    expected = attn.out_proj(attention_reference(q, k, v, causal_mask(5)).transpose(1, 2).reshape(3, 5, 32))
    torch.testing.assert_close(attn(q, k, v, is_causal=True), expected, atol=1e-5, rtol=1e-5)


def test_grouped_queries_share_keys_and_values():
    attn = MultiHeadAttention(32, 4).eval()
    q, k, v = torch.randn(6, 4, 1, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    mask = padding_mask(torch.tensor([[3, 4, 5, 0, 0], [3, 4, 5, 6, 7]]), pad_id=0)
    grouped = attn(q, k, v, mask)  # 3 hypotheses per sentence
    copied = attn(q, k.repeat_interleave(3, 0), v.repeat_interleave(3, 0), mask.repeat_interleave(3, 0))
    torch.testing.assert_close(grouped, copied, atol=1e-6, rtol=1e-5)


def test_causal_mask_gives_zero_weight_to_future():
    q, k, _ = qkv(t=6, s=6)
    weights = attention_weights(q, k, causal_mask(6))
    future = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)
    assert torch.all(weights[..., future] == 0)
    assert torch.all(weights[..., ~future] > 0)


def test_padded_keys_get_zero_weight():
    q, k, _ = qkv(s=5)
    mask = padding_mask(torch.tensor([[3, 4, 0, 0, 0], [3, 4, 5, 6, 0]]), pad_id=0)
    weights = attention_weights(q, k, mask)
    assert torch.all(weights[0, ..., 2:] == 0) and torch.all(weights[1, ..., 4] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 6))


def test_changing_a_padded_source_position_changes_nothing():
    model = tiny_model()
    src = torch.tensor([[5, 6, 7, 2, 0, 0]])
    tgt = torch.tensor([[1, 8, 9, 10]])
    memory, mask = model.encode(src)
    unpadded, _ = model.encode(src[:, :4])
    torch.testing.assert_close(memory[:, :4], unpadded, atol=1e-6, rtol=1e-5)
    noisy = memory.clone()
    noisy[0, 4:] = torch.randn(2, memory.size(-1))  # whatever the padded positions hold
    torch.testing.assert_close(model.decode(tgt, memory, mask), model.decode(tgt, noisy, mask))
