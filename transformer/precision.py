"""Precisions: one table that training's autocast, our inference copies and CTranslate2 all read, and the one
resolver of `auto`.

`PRECISIONS` is the one name → `Kind` table: the settings' allowed values (`trainer.precision`,
`decoding.precision`, `export.quantization`), the dtype training's autocast computes in, the weights of our
inference copy (`transformer.fast_inference`) and CTranslate2's compute type all derive from it. `resolve` is the
only place that turns `auto` into a precision, for the work asked (training or inference) on a device. Importing
this module imports no torch (the console scripts' settings read it); the resolver asks `transformer.hardware`.
"""

from dataclasses import dataclass
from typing import Literal

AUTO = "auto"  # resolved by `resolve`, for the work and the device
Work = Literal["training", "inference"]


@dataclass(frozen=True)
class Kind:
    """One precision and how each engine runs it."""

    dtype: str  # torch's name of the type products take their inputs in
    trains: bool = False  # training runs in it: torch.autocast to `dtype` (none for float32)
    scales_loss: bool = False  # training scales the loss (torch.amp.GradScaler): float16's range underflows
    infers: bool = False  # our inference copy's linear maps run in it (fast_inference; else fp32, with a warning)
    ctranslate2: str | None = None  # CTranslate2's compute_type decoding in it on a CPU; None: none on a CPU
    quantizations: tuple[str, ...] = ()  # export.quantization values storing its weights (CTranslate2's names)


PRECISIONS: dict[str, Kind] = {
    "fp32": Kind("float32", trains=True, infers=True, ctranslate2="float32"),
    "bf16": Kind("bfloat16", trains=True, infers=True, quantizations=("bfloat16",)),
    "fp16": Kind("float16", trains=True, scales_loss=True),
    "int8": Kind("int8", infers=True, ctranslate2="int8", quantizations=("int8", "int8_float32")),
}

TRAINING = (*(name for name, kind in PRECISIONS.items() if kind.trains), AUTO)  # trainer.precision's values
INFERENCE = (*(name for name, kind in PRECISIONS.items() if kind.infers), AUTO)  # decoding.precision's values
FLOAT32_WEIGHTS = "none"  # export.quantization: the weights as trained, float32
QUANTIZATIONS = (FLOAT32_WEIGHTS, *(q for kind in PRECISIONS.values() for q in kind.quantizations))
COMPUTE_TYPES = {name: kind.ctranslate2 for name, kind in PRECISIONS.items() if kind.ctranslate2}  # ours -> CT2's

# The default of `decoding.precision`. What scores a checkpoint (training's validation, transformer-evaluate,
# transformer-results) decodes in fp32, the model's own results, so all three print one BLEU for one checkpoint,
# split and decoding. What translates for a user (translate, serve, backtranslate) decodes in auto: int8 is the
# fastest of ours within 0.2 BLEU of fp32 on the `make train` model (docs/speed.md#precision: test_2016 beam 52.59 vs
# 52.71, greedy 51.76 vs 51.70, 1.13x fp32's sentences/s; on the newest, Zen 4, +0.01 beam and +0.13 greedy, 1.26x
# fp32's beam sentences/s).
SCORED_IN = "fp32"
TRANSLATED_IN = AUTO

# bf16 autocast pays on a CPU only where its products take well under fp32's time, since the casts and the work outside
# products cost extra; 0.8x is a chosen margin, not a measured break-even. Measured: bf16 training 1.5-2x fp32's
# tokens/s on Zen 4, while an Intel Xeon family 6 model 207 without AMX computes bf16 natively at 1.77x fp32's time
# (docs/speed.md, "bf16 that is slower than fp32").
BF16_PAYS_BELOW = 0.8


def bf16_pays(device_type: str) -> bool:
    """Whether bf16 autocast speeds training up on `device_type`: native bf16, and on a CPU products that take under
    `BF16_PAYS_BELOW` of fp32's time (some CPUs compute bf16 natively, but slower than fp32)."""
    from transformer import hardware  # torch: see the module's docstring

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
    from transformer import hardware  # torch: see the module's docstring

    return "int8" if device_type == "cpu" and hardware.int8_available() else "fp32"


def named(type_name: str) -> str:
    """Our name of a torch dtype (`float32` → fp32) or a CTranslate2 compute type (`int8_float32` → int8); a type
    the table lacks as it is."""
    for name, kind in PRECISIONS.items():
        if type_name in (kind.dtype, kind.ctranslate2, *kind.quantizations):
            return name
    return type_name
