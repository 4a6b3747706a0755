import threading

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import rebuilt, tiny_model
from tests.decoding.test_decoding import greedy, greedy_with_scores
from transformer.core.config import AttentionConfig
from transformer.fast_inference import X86_64, PackedAttention, PackedLinear, inference_copy, packable
from transformer.models.attention.dot import DotAttention

needs_onednn = pytest.mark.skipif(
    not (X86_64 and torch.backends.mkldnn.is_available()), reason="packing is used on x86-64 with oneDNN only"
)


@needs_onednn
@pytest.mark.parametrize("shape", [(5, 16), (3, 4, 16), (0, 16)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_product_equals_f_linear(shape, bias, dtype):
    if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no oneDNN bf16")
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(16, 24, bias=bias).to(dtype), torch.randn(shape, dtype=dtype)
    packed = PackedLinear.of(layer)
    with torch.inference_mode():
        assert packable(x, layer.weight)
        out = packed(x)
        assert packed.packed is not None and out.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out, F.linear(x, layer.weight, layer.bias), atol=tol, rtol=tol)


@needs_onednn
def test_fused_projections_equal_the_separate_ones():
    torch.manual_seed(0)
    model = tiny_model()
    attn, fast = model.decoder[0].self_attn, inference_copy(model).decoder[0].self_attn
    x = torch.randn(3, 5, 32)
    with torch.inference_mode():
        for a, b in zip(fast.project_qkv(x), attn.project_qkv(x)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        for a, b in zip(fast.project_kv(x), attn.project_kv(x)):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        assert fast.qkv_proj.packed is not None and fast.kv_proj.packed is not None


@needs_onednn
@pytest.mark.parametrize("queries", [1, 4])
def test_grouped_cross_attention_equals_the_models(queries):
    torch.manual_seed(0)
    model = tiny_model()
    attn, fast = model.decoder[0].cross_attn, inference_copy(model).decoder[0].cross_attn
    memory, h = torch.randn(3, 7, 32), torch.randn(3 * 5, queries, 32)  # 5 hypotheses per sentence
    mask = torch.ones(3, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 4:] = False  # a padded source
    with torch.inference_mode():
        k, v = fast.project_kv(memory)
        assert k.is_contiguous() and v.is_contiguous()  # made once per source: no step copies them
        expected = attn(attn.project_q(h), *attn.project_kv(memory), mask=mask)
        torch.testing.assert_close(fast(fast.project_q(h), k, v, mask=mask), expected, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_the_copy_shares_weights_and_leaves_the_model_plain():
    model = tiny_model()
    before = {name: type(m) for name, m in model.named_modules()}
    fast = inference_copy(model)
    src, tgt = torch.randint(3, 40, (2, 6)), torch.randint(3, 40, (2, 5))
    with torch.inference_mode():
        torch.testing.assert_close(fast(src, tgt), model(src, tgt), atol=1e-5, rtol=1e-5)
    assert {name: type(m) for name, m in model.named_modules()} == before  # nothing swapped in the model
    assert not any(isinstance(m, PackedLinear) for m in model.modules())
    assert isinstance(fast.output, PackedLinear) and fast.output.parts[0][0] is model.output.weight
    assert inference_copy(fast) is fast and inference_copy(model) is not fast  # a copy has nothing left to pack


def test_training_never_sees_packing():
    torch.manual_seed(0)
    model = tiny_model().train()
    src, tgt = torch.randint(3, 40, (2, 6)), torch.randint(3, 40, (2, 5))
    model(src, tgt).sum().backward()
    assert all(type(m) is not PackedLinear for m in model.modules())
    assert model.decoder[0].self_attn.q_proj.weight.grad is not None
    assert inference_copy(model.to(torch.float64)) is model  # nothing to gain off fp32/bf16: no copy


def decodes_like_a_fresh_copy(model) -> None:
    """A new inference copy of `model` (as each validation makes) searches as a separately built model does."""
    fresh = rebuilt(model)
    src = torch.randint(3, 40, (4, 6), generator=torch.Generator().manual_seed(0))
    ids, scores = greedy_with_scores(inference_copy(model), src, 8)
    fresh_ids, fresh_scores = greedy_with_scores(fresh, src, 8)
    assert torch.equal(ids, fresh_ids)
    torch.testing.assert_close(scores, fresh_scores, atol=1e-5, rtol=1e-5)


def test_a_fused_adam_step_between_searches_is_seen():
    """Fused Adam changes weights in place without bumping their version counters."""
    model = tiny_model()
    src = torch.randint(3, 40, (4, 6))
    greedy(inference_copy(model), src, 8)  # packs the weights before the step
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05, fused=True)
    model.train()
    model(src, src).logsumexp(-1).mean().backward()
    optimizer.step()
    decodes_like_a_fresh_copy(model)


def test_loaded_weights_between_searches_are_seen():
    model = tiny_model(seed=0)
    greedy(inference_copy(model), torch.randint(3, 40, (4, 6)), 8)
    model.load_state_dict(tiny_model(seed=1).state_dict())
    decodes_like_a_fresh_copy(model)


def test_searches_in_two_threads_give_what_they_give_alone():
    model = inference_copy(tiny_model(seed=2))  # one copy for both threads, as a translator's
    sources = [torch.randint(3, 40, (3, 5 + i), generator=torch.Generator().manual_seed(i)) for i in range(2)]
    alone = [greedy(model, src, 12) for src in sources]
    results: dict[int, list] = {0: [], 1: []}

    def run(i):
        for _ in range(5):
            results[i].append(greedy(model, sources[i], 12))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        assert len(results[i]) == 5 and all(torch.equal(out, alone[i]) for out in results[i])


def public_fields(module: torch.nn.Module) -> dict:
    return {k: v for k, v in vars(module).items() if not k.startswith("_")}


def test_packed_attention_keeps_every_field_of_the_attention():
    attention = DotAttention(32, 4, 0.1, AttentionConfig(window=3), max_length=77)
    attention.new_field = "a field added to Attention later"
    packed = PackedAttention.of(attention)
    assert public_fields(packed) == public_fields(attention) and isinstance(packed, DotAttention)
    assert set(packed._modules) == {"q_proj", "out_proj", "qkv_proj", "kv_proj"}
