import pytest
import torch
import torch.nn.functional as F

from tests.conftest import rebuilt, tiny_model
from transformer.decoding import greedy_decode
from transformer.linear import X86_64, Linear, PackedLinear, packable, packed_weights

needs_onednn = pytest.mark.skipif(
    not (X86_64 and torch.backends.mkldnn.is_available()), reason="packing is used on x86-64 with oneDNN only"
)


@needs_onednn
@pytest.mark.parametrize("shape", [(5, 16), (3, 4, 16), (0, 16)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_inference_equals_f_linear_inside_a_block_only(shape, bias, dtype):
    if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no oneDNN bf16")
    torch.manual_seed(0)
    layer, x = Linear(16, 24, bias=bias).to(dtype), torch.randn(shape, dtype=dtype)
    with torch.inference_mode():
        assert packable(x, layer.weight)
        with packed_weights(layer):
            out = layer(x)
            assert layer.packed.packed_copy is not None and out.dtype == dtype
        assert layer.packed.packed_copy is None  # dropped at the end of the block
        layer(x)
        assert layer.packed.packed_copy is None  # outside a block: F.linear
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out, F.linear(x, layer.weight, layer.bias), atol=tol, rtol=tol)


@needs_onednn
def test_blocks_nest():
    layer, x = Linear(16, 24), torch.randn(5, 16)
    with torch.no_grad(), packed_weights(layer):
        with packed_weights(layer):
            layer(x)
        assert layer.packed.packed_copy is not None  # the outer block still holds its copy
    assert layer.packed.packed_copy is None


@needs_onednn
def test_slices_of_one_weight_keep_their_own_packed_copies():
    torch.manual_seed(0)
    weight, x = torch.randn(12, 8), torch.randn(3, 8)
    top, bottom = PackedLinear(), PackedLinear()
    top.depth = bottom.depth = 1  # as inside a block
    with torch.no_grad():
        for _ in range(2):  # the second round reads the packed copies
            torch.testing.assert_close(top(x, weight[:4]), x @ weight[:4].T, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(bottom(x, weight[4:]), x @ weight[4:].T, atol=1e-5, rtol=1e-5)


def test_training_uses_autograd_inside_a_block_too():
    torch.manual_seed(0)
    layer, x = Linear(16, 24), torch.randn(5, 16)
    with packed_weights(layer):
        assert not packable(x, layer.weight)  # grad is enabled
        layer(x).sum().backward()
    assert layer.weight.grad is not None


def decodes_like_a_fresh_copy(model) -> None:
    fresh = rebuilt(model)
    src = torch.randint(3, 40, (4, 6), generator=torch.Generator().manual_seed(0))
    ids, scores = greedy_decode(model, src, 1, 2, 8, return_scores=True)
    fresh_ids, fresh_scores = greedy_decode(fresh, src, 1, 2, 8, return_scores=True)
    assert torch.equal(ids, fresh_ids)
    torch.testing.assert_close(scores, fresh_scores, atol=1e-5, rtol=1e-5)


def test_a_fused_adam_step_between_searches_is_seen():
    """Fused Adam changes weights in place without bumping their version counters."""
    model = tiny_model()
    src = torch.randint(3, 40, (4, 6))
    greedy_decode(model, src, 1, 2, 8)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05, fused=True)
    model.train()
    model(src, src).logsumexp(-1).mean().backward()
    optimizer.step()
    decodes_like_a_fresh_copy(model)


def test_loaded_weights_between_searches_are_seen():
    model = tiny_model(seed=0)
    greedy_decode(model, torch.randint(3, 40, (4, 6)), 1, 2, 8)
    model.load_state_dict(tiny_model(seed=1).state_dict())
    decodes_like_a_fresh_copy(model)
