"""What `auto` means here: the precision training and inference run in on this machine, from the probes of
`compute.hardware`; `resolve` is the only place that turns `auto` into a precision of `core.precision.PRECISIONS`."""

from typing import Literal

from transformer.compute import hardware
from transformer.core.precision import AUTO, INFERENCE, TRAINING

Work = Literal["training", "inference"]

# bf16 autocast pays on a CPU only where its products take well under fp32's time, since the casts and the work outside
# products cost extra; 0.8x is a chosen margin, not a measured break-even. Measured: bf16 training 1.5-2x fp32's
# tokens/s on Zen 4, while an Intel Xeon family 6 model 207 without AMX computes bf16 natively at 1.77x fp32's time
# (docs/speed.md, "bf16 that is slower than fp32").
BF16_PAYS_BELOW = 0.8


def bf16_pays(device_type: str) -> bool:
    """Whether bf16 autocast speeds training up on `device_type`: native bf16, and on a CPU products that take under
    `BF16_PAYS_BELOW` of fp32's time (some CPUs compute bf16 natively, but slower than fp32)."""
    if not hardware.native_bf16(device_type):
        return False
    return device_type != "cpu" or hardware.bf16_ratio() < BF16_PAYS_BELOW


def resolve(precision: str, work: Work, device_type: str) -> str:
    """`precision` for `work` on a `device_type` device, `auto` resolved: training in bf16 where it pays
    (`bf16_pays`), else fp32; inference in int8 on a CPU where PyTorch's x86 int8 engine runs, else fp32. Any other
    precision as it is; one `work` does not run is a ValueError."""
    allowed = TRAINING if work == "training" else INFERENCE
    if precision not in allowed:
        raise ValueError(f"precision={precision!r} is not one of {', '.join(allowed)} for {work}")
    if precision != AUTO:
        return precision
    if work == "training":
        return "bf16" if bf16_pays(device_type) else "fp32"
    return "int8" if device_type == "cpu" and hardware.int8_available() else "fp32"
