"""Which kernels an inference copy runs on this CPU: chosen per precision from what the CPU has, logged once.

Nothing here requires an instruction set: a precision whose kernels this CPU lacks runs as fp32, with one warning.
"""

import functools
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from transformer.compute.auto import resolve
from transformer.compute.hardware import INT8_ENGINE, X86_64, cpu_isa, has, int8_available, native_bf16
from transformer.core.precision import AUTO

log = logging.getLogger("transformer.fast_inference")

QLINEAR_FROM = 32  # int8 products for this many sentences or hypotheses or more run oneDNN's qlinear (`int8`)


@functools.cache
def onednn() -> bool:
    """Whether oneDNN's packed products run here: an x86-64 CPU and a PyTorch built with oneDNN (asked once: every
    product asks)."""
    return X86_64 and torch.backends.mkldnn.is_available()


def int8_backend() -> str:
    """The library behind the x86 engine's dynamic int8 products here: oneDNN with VNNI, fbgemm without."""
    return "oneDNN" if has("vnni") else "fbgemm"


@functools.cache
def qlinear_available() -> bool:
    """Whether oneDNN's `qlinear_pointwise` multiplies u8 by s8 natively here: VNNI (or AMX) and a PyTorch that has
    it (without VNNI it would add pairs of products in 16 bits, as fbgemm does)."""
    return onednn() and has("vnni") and hasattr(torch.ops.onednn, "qlinear_pointwise")


def int8_kernels() -> str:
    """The int8 products that run here, as the log names them."""
    kernels = f"{int8_backend()} linear_dynamic"
    if qlinear_available():
        kernels = f"oneDNN qlinear for batches of {QLINEAR_FROM} or more, {kernels} below"
    return kernels


def reduce_range() -> bool:
    """Whether activations are quantized to 7 bits: without VNNI, fbgemm adds pairs of u8·s8 products in 16 bits,
    which 8-bit activations could saturate (PyTorch's own x86 default, `get_default_qconfig("x86")`)."""
    return not has("vnni")


_engine_lock = threading.Lock()


@contextmanager
def int8_engine() -> Iterator[None]:
    """PyTorch's quantized engine set to the x86 one while weights are packed (a packed weight keeps its engine)."""
    with _engine_lock:
        before = torch.backends.quantized.engine
        torch.backends.quantized.engine = INT8_ENGINE
        try:
            yield
        finally:
            torch.backends.quantized.engine = before


@functools.cache
def runs(precision: str) -> str:
    """The precision a copy asked for `precision` runs in on this CPU; says once per process which kernels run."""
    if precision == AUTO:
        return runs(resolve(precision, "inference", "cpu"))
    isa = cpu_isa()
    if precision == "bf16" and not (onednn() and native_bf16("cpu")):
        log.warning("inference: bf16 unavailable on this CPU (%s: no native bf16 products): fp32", isa)
        return "fp32"
    if precision == "int8" and not int8_available():
        log.warning("inference: int8 unavailable on this CPU (%s; PyTorch's x86 int8 engine needs AVX2): fp32", isa)
        return "fp32"
    kernel = {"fp32": "oneDNN" if onednn() else "F.linear", "bf16": "oneDNN", "int8": int8_kernels()}[precision]
    log.info("inference: %s via %s (%s)", precision, kernel, isa)
    return precision


@functools.cache
def not_applied(precision: str, where: str) -> None:
    """Say once that `precision` is not applied to a model on `where` (another device or dtype)."""
    log.warning(
        "inference: precision=%s applies to float32 models on an x86-64 CPU: searching this %s model as it is",
        precision,
        where,
    )
