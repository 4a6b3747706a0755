import copy

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import tiny_model
from transformer.decoding import greedy_decode
from transformer.linear import X86_64, Linear, PackedLinear, packable

needs_onednn = pytest.mark.skipif(
    not (X86_64 and torch.backends.mkldnn.is_available()), reason="packing is used on x86-64 with oneDNN only"
)


@needs_onednn
@pytest.mark.parametrize("shape", [(5, 16), (3, 4, 16)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_inference_equals_f_linear_and_takes_the_packed_path(shape, bias, dtype):
    torch.manual_seed(0)
    layer, x = Linear(16, 24, bias=bias).to(dtype), torch.randn(shape, dtype=dtype)
    with torch.inference_mode():
        assert packable(x, layer.weight)
        out = layer(x)
    assert layer.packed._cached is not None and out.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out, F.linear(x, layer.weight, layer.bias), atol=tol, rtol=tol)


@needs_onednn
def test_a_changed_weight_is_packed_again():
    torch.manual_seed(0)
    layer, x = Linear(16, 24), torch.randn(5, 16)
    with torch.no_grad():
        before = layer(x)
        layer.weight.mul_(-2.0)  # in place: same storage, new version
        after = layer(x)
    torch.testing.assert_close(after, F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(before, after)


@needs_onednn
def test_slices_of_one_weight_keep_their_own_packed_copies():
    torch.manual_seed(0)
    weight, x = torch.randn(12, 8), torch.randn(3, 8)
    top, bottom = PackedLinear(), PackedLinear()
    with torch.no_grad():
        for _ in range(2):  # the second round reads the cached copies
            torch.testing.assert_close(top(x, weight[:4]), x @ weight[:4].T, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(bottom(x, weight[4:]), x @ weight[4:].T, atol=1e-5, rtol=1e-5)


def test_training_uses_autograd():
    torch.manual_seed(0)
    layer, x = Linear(16, 24), torch.randn(5, 16)
    assert not packable(x, layer.weight)  # grad is enabled
    layer(x).sum().backward()
    assert layer.weight.grad is not None and layer.packed._cached is None


def test_loaded_weights_replace_the_packed_ones():
    """A model that has decoded, then loads other weights, decodes as a fresh model with those weights."""
    used, other = tiny_model(seed=0), tiny_model(seed=1)
    src = torch.randint(3, 40, (4, 6))
    greedy_decode(used, src, 1, 2, 8)
    used.load_state_dict(other.state_dict())
    assert torch.equal(greedy_decode(used, src, 1, 2, 8), greedy_decode(other, src, 1, 2, 8))


def test_a_deep_copy_decodes_like_its_original():
    model = tiny_model()
    src = torch.randint(3, 40, (4, 6))
    first = greedy_decode(model, src, 1, 2, 8)
    assert torch.equal(greedy_decode(copy.deepcopy(model), src, 1, 2, 8), first)
