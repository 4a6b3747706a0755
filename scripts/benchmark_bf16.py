"""Whether this CPU computes bf16 natively, and faster than fp32: one training-sized linear map (2048×256 by
256×1024) in fp32 and in bf16 on one thread, medians of 7 interleaved rounds (`hardware.linear_ms`); what
`trainer.precision=auto` decides from them.

    python scripts/benchmark_bf16.py
"""

from transformer.hardware import bf16_ratio, linear_ms, native_bf16
from transformer.precision import BF16_PAYS_BELOW, bf16_pays

if __name__ == "__main__":
    ms, ratio = linear_ms(), bf16_ratio()
    choice = "bf16" if bf16_pays("cpu") else "fp32"
    print(
        f"native bf16: {native_bf16('cpu')}; fp32 {ms['fp32']:.2f} ms, bf16 {ms['bf16']:.2f} ms "
        f"({ratio:.2f}x fp32's time); trainer.precision=auto trains in {choice} (bf16 below {BF16_PAYS_BELOW}x)"
    )
