"""Dropout whose mask is cheap on CPU.

PyTorch's CPU `bernoulli_` draws one Mersenne Twister number per element (about 6 ns): at the `small` model's
sizes a training step spent an eighth of its time making dropout masks. Here each 64-bit random word gives four
15-bit draws, one per element, and an element is kept where its draw is at least p·2¹⁵: the same Bernoulli mask,
with p rounded to a multiple of 2⁻¹⁵ (scaled by 1/(1 − that p), so the expectation stays exact), from the same
generator (so seeds and exact resume hold), at a quarter of the draws
(docs/speed.md#dropout-masks-on-cpu-zen-4-2026-11-29). Elsewhere (a GPU's generator is fast), under `torch.compile`
(Inductor generates its own random numbers) and in eval mode it is `nn.Dropout` itself.
"""

import torch
from torch import Tensor, nn

LEVELS = 1 << 15  # the values of one draw: 15 random bits
SLICES = 4  # 16-bit slices of one 64-bit word (PyTorch's int64 `random_()` gives 63 random bits: the top one is 0)


def dropout_mask(shape: torch.Size, dropped: int, device: torch.device, dtype: torch.dtype = torch.float32) -> Tensor:
    """0 where an element is dropped (each with probability dropped/2¹⁵, independently), else 1, in `dtype`."""
    n = shape.numel()
    words = torch.empty(-(-n // SLICES), dtype=torch.int64, device=device).random_()  # (⌈n/4⌉,)
    draws = words.view(torch.int16)[:n].view(shape) & (LEVELS - 1)  # (*shape) in [0, 2¹⁵)
    below = (draws - dropped) >> 15  # -1 where the draw is below `dropped` (element dropped), else 0: int16,
    return below.add_(1).to(dtype)  # where comparisons into bool tensors cost 8 times as much


class Dropout(nn.Dropout):
    """`nn.Dropout` with the mask of `dropout_mask` on CPU in training (see the module's docstring)."""

    def forward(self, x: Tensor) -> Tensor:
        dropped = round(self.p * LEVELS)
        native = torch.compiler.is_compiling() or x.device.type != "cpu"  # compiled: Inductor draws its own
        if native or not self.training or self.inplace or not 0 < dropped < LEVELS:
            return super().forward(x)
        return x * dropout_mask(x.shape, dropped, x.device, x.dtype) * (LEVELS / (LEVELS - dropped))
