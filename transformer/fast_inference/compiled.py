"""The decoder step compiled ahead of time: `torch.export` of `static_step.DecoderStep` built into native code by
AOTInductor (weights frozen in), so a step runs without Python or PyTorch's dispatch.

A package is built on first use (tens of seconds; one log line says so) and kept in this tool's cache folder
(`cache_folder`), named by `package_key`: a digest of the weights and their names, the precision, the torch version,
the CPU's instruction set and the step's own source. It is written atomically with a digest beside it, and loaded only
from there and only when the digest matches: a package is native code, so none is ever taken from a checkpoint, an
export or a run folder. A partial, corrupt or unloadable package is built again. The package takes any number of
rows, source length and cache length (one row a source: a beam's hypotheses each get the source's keys and values).
Where no package can be built (no compiler, an export that fails) `compiled_step` says so once and gives None: the
eager step runs.
"""

import hashlib
import inspect
import logging
import os
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from transformer.compute.hardware import cpu_isa
from transformer.core.files import atomic_write, atomic_write_text
from transformer.fast_inference import TRACED_KERNELS, static_step, traced_copy
from transformer.fast_inference.int8 import Int8Traced
from transformer.fast_inference.packed import TracedAttention
from transformer.fast_inference.static_step import DecoderStep
from transformer.models.attention.dot import DotAttention
from transformer.models.transformer import Transformer

log = logging.getLogger("transformer.fast_inference")

MAX_ROWS = 4096  # the largest batch of rows, source length and cache length a package takes
PRECISIONS = tuple(TRACED_KERNELS)  # what a package computes in, as `inference_copy` does


def cache_folder() -> Path:
    """Where packages live: $TRANSFORMER_CACHE/compiled, else $XDG_CACHE_HOME (~/.cache)/transformer/compiled."""
    root = os.environ.get("TRANSFORMER_CACHE")
    if root:
        return Path(root) / "compiled"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "transformer" / "compiled"


def package_key(model: nn.Module, precision: str) -> str:
    """A name for `model`'s package in `precision` that changes with anything the native code depends on."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype};".encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    for part in (
        precision,
        torch.__version__,
        cpu_isa(),
        inspect.getsource(static_step),
        inspect.getsource(_export),
        inspect.getsource(Int8Traced),
        inspect.getsource(TracedAttention),
    ):
        digest.update(part.encode())
    return digest.hexdigest()[:24]


def _export(model: nn.Module, precision: str) -> torch.export.ExportedProgram:
    """`DecoderStep` over `model`'s traced copy in `precision`, exported with its rows, source length and cache
    length dynamic."""
    layers, attention = len(model.decoder), model.decoder[0].self_attn
    heads, head_dim = attention.n_heads, attention.d_model // attention.n_heads
    rows, source, length = 3, 5, 7  # distinct and above 1, so that export keeps each dimension symbolic
    rows_dim = torch.export.Dim("rows", min=1, max=MAX_ROWS)
    source_dim = torch.export.Dim("source", min=1, max=MAX_ROWS)
    length_dim = torch.export.Dim("length", min=2, max=MAX_ROWS)
    own = [torch.zeros(rows, heads, length, head_dim) for _ in range(2 * layers)]
    memory = [torch.randn(rows, heads, source, head_dim) for _ in range(2 * layers)]
    inputs = (torch.ones(rows, 1, dtype=torch.long), torch.tensor(2), torch.ones(rows, 1, 1, source, dtype=torch.bool))
    shapes = (
        {0: rows_dim},
        None,
        {0: rows_dim, 3: source_dim},
        tuple([{0: rows_dim, 2: length_dim}] * len(own) + [{0: rows_dim, 2: source_dim}] * len(memory)),
    )
    with torch.no_grad():
        return torch.export.export(
            DecoderStep(traced_copy(model, precision)), (*inputs, *own, *memory), dynamic_shapes=shapes
        )


class CompiledStep:
    """A loaded package, called as `DecoderStep` is: (tokens, position, src_mask, *kv) -> logits (N, V)."""

    def __init__(self, path: Path):
        self.runner = torch._inductor.aoti_load_package(str(path))
        self.run = self.runner.loader.boxed_run  # the model's own call re-reads its specs each time

    def __call__(self, tokens: Tensor, position: Tensor, src_mask: Tensor, *kv: Tensor) -> Tensor:
        return self.run([tokens, position, src_mask, *kv])[0]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _build(model: nn.Module, precision: str, package: Path, digest: Path) -> None:
    """Export and compile `model`'s step into `package`, then write its digest (each atomically)."""
    log.info("compiling the decoder step ahead of time (once for this model, torch and CPU): %s", package.name)
    start = time.perf_counter()
    program = _export(model, precision)
    config = {"freezing": True}
    atomic_write(
        package,
        lambda tmp: torch._inductor.aoti_compile_and_package(program, package_path=str(tmp), inductor_configs=config),
    )
    atomic_write_text(digest, _digest(package))
    log.info("compiled the decoder step in %.1f s", time.perf_counter() - start)


def _cached(package: Path, digest: Path) -> CompiledStep | None:
    """The package at `package` where it is whole (its digest matches) and loads; None otherwise."""
    if not (package.is_file() and digest.is_file()) or digest.read_text().strip() != _digest(package):
        return None
    try:
        return CompiledStep(package)
    except Exception as error:  # noqa: BLE001 (any failure to load means: build it again)
        log.warning("the compiled step %s does not load (%s): building it again", package.name, error)
        return None


def unserved(model: nn.Module, precision: str) -> str | None:
    """Why no package serves `model` in `precision`, or None where one does: a `Transformer` with `dot` attention
    in every use of its decoder, fp32 on the CPU."""
    if not isinstance(model, Transformer):
        return f"{type(model).__name__} models decode eagerly"
    attentions = [attention for layer in model.decoder for attention in (layer.self_attn, layer.cross_attn)]
    if not all(isinstance(attention, DotAttention) for attention in attentions):
        return "only dot attention is compiled"
    weight = next(model.parameters())
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        return f"only float32 models on the CPU are compiled, not {weight.dtype} on {weight.device.type}"
    if precision not in PRECISIONS:
        return f"a package computes in {', '.join(PRECISIONS)}, not {precision}"
    return None


def compiled_step(model: nn.Module, precision: str) -> CompiledStep | None:
    """`model`'s decoder step compiled in `precision`, from this tool's cache or built now; None (with a log line)
    where no package serves it here."""
    reason = unserved(model, precision)
    if reason is not None:
        log.info("decoding.compiled: %s; the eager engine runs", reason)
        return None
    folder = cache_folder()
    key = package_key(model, precision)
    package, digest = folder / f"step-{key}.pt2", folder / f"step-{key}.sha256"
    step = _cached(package, digest)
    if step is not None:
        return step
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        _build(model, precision, package, digest)
        return CompiledStep(package)
    except Exception as error:  # noqa: BLE001 (no compiler, an export that fails: the eager step still runs)
        log.warning("decoding.compiled: the decoder step did not compile (%s): the eager engine runs", error)
        return None
