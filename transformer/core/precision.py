"""Precisions: one table that training's autocast, our inference copies and CTranslate2 all read.

`PRECISIONS` is the one name → `Kind` table: the settings' allowed values (`trainer.precision`,
`decoding.precision`, `export.quantization`), the dtype training's autocast computes in, the weights of our
inference copy (`transformer.fast_inference`) and CTranslate2's compute type all derive from it. What `auto` means on a
device is decided by `transformer.compute.auto.resolve`; this module imports no torch (the settings read it).
"""

from dataclasses import dataclass

AUTO = "auto"  # resolved by `compute.auto.resolve`, for the work and the device


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


def named(type_name: str) -> str:
    """Our name of a torch dtype (`float32` → fp32) or a CTranslate2 compute type (`int8_float32` → int8); a type
    the table lacks as it is."""
    for name, kind in PRECISIONS.items():
        if type_name in (kind.dtype, kind.ctranslate2, *kind.quantizations):
            return name
    return type_name
