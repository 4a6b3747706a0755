"""Checkpoints as single safetensors files: weights, tokenizer and config, no pickle.

A checkpoint holds the model's tensors (`model.*`), the SentencePiece models as
uint8 tensors (`tokenizer.src`, `tokenizer.tgt`) and, as string metadata, the
resolved training config (YAML) and progress (step, val BLEU). It is written to
a temporary file and renamed, so a crash never leaves a half-written one.
"""

from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from transformer.core.errors import UserError
from transformer.core.files import atomic_write
from transformer.data.tokenizer import Tokenizer
from transformer.models.factory import build_model
from transformer.runs.run_folder import RunFolder
from transformer.runs.training_state import PREFIX as STATE_PREFIX
from transformer.runs.training_state import pack, unpack

FORMAT = "transformer-nmt/1"


def convert_legacy_weights(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Weights of checkpoints written before q/k/v became separate `nn.Linear`s, renamed for today's model.

    A fused `in_proj` (3D, D) splits into `q_proj`/`k_proj`/`v_proj` weights; `q_bias`/`v_bias` become their biases.
    """
    renamed = {"q_bias": "q_proj.bias", "v_bias": "v_proj.bias"}
    out = {}
    for name, tensor in weights.items():
        module, _, leaf = name.rpartition(".")
        if leaf == "in_proj":
            for proj, block in zip(("q_proj", "k_proj", "v_proj"), tensor.chunk(3)):
                out[f"{module}.{proj}.weight"] = block.contiguous()
        else:
            out[f"{module}.{renamed[leaf]}" if leaf in renamed else name] = tensor
    return out


@dataclass
class Checkpoint:
    """What a checkpoint file restores."""

    model: nn.Module  # either family, built by `factory.build_model`
    tokenizer: Tokenizer
    config: DictConfig  # the resolved training config
    meta: dict[str, str]  # step, val_bleu, ...
    path: Path
    state: dict | None = None  # training state, in resumable checkpoints


def _bytes_tensor(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _unique_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict without the second name of a tied weight (the model re-ties it)."""
    state, seen = {}, set()
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            state[name] = tensor
    return state


def save_checkpoint(
    path: Path, model: nn.Module, tokenizer: Tokenizer, config: DictConfig, state: dict | None = None, **meta
) -> None:
    """Write the checkpoint atomically (temporary file, then rename).

    `state` (optimizer, gradient scaler, RNGs, progress) makes it resumable; see `transformer.runs.training_state`.
    """
    tensors = {f"model.{name}": t.detach().contiguous().cpu() for name, t in _unique_state(model).items()}
    tensors["tokenizer.src"] = _bytes_tensor(tokenizer.src_model)
    tensors["tokenizer.tgt"] = _bytes_tensor(tokenizer.tgt_model)
    metadata = {"format": FORMAT, "config": OmegaConf.to_yaml(config), **{k: str(v) for k, v in meta.items()}}
    if state is not None:
        state_tensors, metadata["state"] = pack(state)
        tensors.update(state_tensors)
    atomic_write(path, lambda tmp: save_file(tensors, str(tmp), metadata=metadata))


def resolve_checkpoint(path: str) -> Path:
    """A checkpoint file, or a run directory's best (else last) checkpoint."""
    p = Path(path)
    if p.is_dir():
        run = RunFolder(p)
        trained = run.trained()
        if trained is None:
            raise UserError(
                f"no checkpoint in {run.checkpoints}; give a run directory of transformer-train or a .safetensors file"
            )
        return trained
    if not p.exists():
        raise UserError(f"checkpoint {p} does not exist")
    return p


def _unreadable(file: Path, err: Exception) -> UserError:
    return UserError(f"{file} is not a readable checkpoint ({err}); it may be truncated or corrupted")


def read_metadata(file: Path) -> dict[str, str]:
    """A checkpoint file's metadata (config, step, val BLEU, ...) without reading its tensors."""
    try:
        with safe_open(str(file), framework="pt") as f:
            metadata = f.metadata() or {}
    except (SafetensorError, OSError) as err:
        raise _unreadable(file, err) from err
    if metadata.get("format") != FORMAT:
        raise UserError(f"{file} is not a checkpoint of this tool (format {metadata.get('format')!r})")
    return metadata


def read_header(path: str) -> tuple[Path, DictConfig, Tokenizer]:
    """A checkpoint's file, training config and tokenizer, without its weights (for checks before any work)."""
    file = resolve_checkpoint(path)
    metadata = read_metadata(file)
    try:
        with safe_open(str(file), framework="pt") as f:
            models = [f.get_tensor(f"tokenizer.{side}").numpy().tobytes() for side in ("src", "tgt")]
    except (SafetensorError, OSError) as err:
        raise _unreadable(file, err) from err
    return file, OmegaConf.create(metadata["config"]), Tokenizer(*models)


def load_checkpoint(path: str, device: torch.device | str = "cpu") -> Checkpoint:
    """Load a checkpoint file or run directory without executing any code from it."""
    file = resolve_checkpoint(path)
    metadata = read_metadata(file)
    try:
        tensors = load_file(str(file))
    except (SafetensorError, OSError) as err:
        raise _unreadable(file, err) from err
    tokenizer = Tokenizer(
        tensors.pop("tokenizer.src").numpy().tobytes(), tensors.pop("tokenizer.tgt").numpy().tobytes()
    )
    state_tensors = {name: tensors.pop(name) for name in [n for n in tensors if n.startswith(STATE_PREFIX)]}
    state = unpack(state_tensors, metadata.pop("state")) if "state" in metadata else None
    config = OmegaConf.create(metadata.pop("config"))
    try:
        model = build_model(config.model, tokenizer)
    except (TypeError, ValueError) as err:
        raise UserError(f"{file}: its model config cannot be built by this version ({err})") from err
    weights = convert_legacy_weights({name.removeprefix("model."): t for name, t in tensors.items()})
    expected = _unique_state(model)
    if weights.keys() != expected.keys() or any(weights[k].shape != expected[k].shape for k in weights):
        raise UserError(f"{file}: its weights do not match its model config; the file is damaged or was edited")
    model.load_state_dict(weights, strict=False)
    return Checkpoint(model.to(device).eval(), tokenizer, config, metadata, file, state)
