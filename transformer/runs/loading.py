"""The one way to load a model to translate with: `load(checkpoint)`, then `.translator(decoding)`.

`checkpoint` is what a user gives as `checkpoint=`: a run folder (its best, else last checkpoint), a checkpoint file,
a list of them (their ensemble, `transformer.decoding.ensemble`), or with `engine=ctranslate2` a `transformer-export
format=ctranslate2` folder. translate, evaluate, serve, backtranslate, results and export all load through it, and
every decoding's corpus tag is checked here, before any translation.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig
from torch import nn

from transformer.compute.runtime import pick_device
from transformer.core.config import AlignmentConfig, DecodingConfig, Engine, choices
from transformer.core.errors import UserError
from transformer.data.tokenizer import Tokenizer
from transformer.decoding.alignment import Aligner, attention_weights, model_head
from transformer.decoding.ensemble import Ensemble
from transformer.decoding.translator import TextTranslator, Translator
from transformer.runs.checkpoint import Checkpoint, load_checkpoint

if TYPE_CHECKING:
    from transformer.decoding.ctranslate2_engine import Export

log = logging.getLogger(__name__)


def _direction(ckpt: Checkpoint) -> str:
    return f"{ckpt.config.data.src_lang}→{ckpt.config.data.tgt_lang}"


def check_members(ckpts: list[Checkpoint]) -> None:
    """Refuse an ensemble whose models differ in vocabulary (SentencePiece models, tags) or direction."""
    first = ckpts[0]
    for other in ckpts[1:]:
        if not other.tokenizer.same_models(first.tokenizer):
            raise UserError(
                f"{other.path} and {first.path} have different vocabularies (SentencePiece models); "
                "an ensemble needs models trained on the same prepared data"
            )
        if _direction(other) != _direction(first):
            raise UserError(
                f"{other.path} translates {_direction(other)} but {first.path} {_direction(first)}; "
                "an ensemble needs models of one direction"
            )


def checkpoint_paths(checkpoint) -> list[str]:
    """`checkpoint=PATH` or `checkpoint=[A,B,...]` as a list of paths."""
    paths = [checkpoint] if isinstance(checkpoint, str) else [str(p) for p in checkpoint]
    if not paths:
        raise UserError("checkpoint=[] names no model; give checkpoint=RUN_DIR or checkpoint=[A,B]")
    return paths


@dataclass(frozen=True)
class Loaded:
    """What `checkpoint=` named, loaded: its members and the model searched over them.

    `members`: each model's `Checkpoint` (engine=pytorch), or the one `Export` (ctranslate2); every one has the
    training `config`, a `path` (the file) and `meta`. `model`: the one model, or the `Ensemble` of the members;
    None for an export, which CTranslate2 loads when its translator is made.
    """

    members: Sequence["Checkpoint | Export"]
    tokenizer: Tokenizer
    model: nn.Module | None
    device: str  # for CTranslate2: cpu, cuda or auto

    @property
    def path(self) -> Path:
        return self.members[0].path

    @property
    def config(self) -> DictConfig:
        return self.members[0].config

    @property
    def meta(self) -> dict[str, str]:
        return self.members[0].meta

    def translator(self, decoding: DecodingConfig) -> TextTranslator:
        """A translator with `decoding`'s settings (a `Translator`'s inference copy is in its precision); refuses a
        corpus tag the model lacks."""
        self.tokenizer.tag_prefix(decoding.tag)
        if self.model is not None:
            return Translator(self.model, self.tokenizer, decoding)
        from transformer.decoding.ctranslate2_engine import CTranslate2Translator  # importable: `load` checked it

        return CTranslate2Translator(str(self.path.parent), decoding, device=self.device)

    def aligner(self, alignment: AlignmentConfig) -> Aligner:
        """Word alignments from the cross-attention `alignment` names (defaults: `decoding.alignment.default_head`);
        an ensemble aligns with its first model's attention."""
        if self.model is None:
            raise UserError("word alignments read our model's attention: use engine=pytorch with a checkpoint")
        model = self.model.members[0] if isinstance(self.model, Ensemble) else self.model
        head = model_head(self.config, alignment.layer, alignment.head, model.cross_attention_layers)
        try:
            attention_weights(model, [[]], [[]], head)  # a layer or head the model lacks is refused here
        except ValueError as err:
            raise UserError(f"{err}; choose another alignment.layer / alignment.head") from err
        log.info("word alignments from %s", head.describe())
        return Aligner(model, self.tokenizer.piece_table("src"), self.tokenizer.piece_table("tgt"), head)


def _load_checkpoints(paths: list[str], device: str) -> Loaded:
    torch_device = pick_device(device)
    ckpts = [load_checkpoint(path, torch_device) for path in paths]
    check_members(ckpts)
    model = ckpts[0].model if len(ckpts) == 1 else Ensemble([c.model for c in ckpts])
    return Loaded(ckpts, ckpts[0].tokenizer, model, device)


def _load_export(paths: list[str], device: str) -> Loaded:
    if len(paths) > 1:
        raise UserError("engine=ctranslate2 decodes one export; give one checkpoint=FOLDER (ensembles: engine=pytorch)")
    try:
        from transformer.decoding.ctranslate2_engine import load_export
    except ImportError as err:
        hint = "pip install -e '.[export]'"
        raise UserError(f"engine=ctranslate2 needs the ctranslate2 package ({err}): {hint}") from err
    export, tokenizer = load_export(paths[0])
    return Loaded([export], tokenizer, None, device)


def load(checkpoint, *, engine: Engine = "pytorch", device: str = "auto") -> Loaded:
    """The model(s) of `checkpoint` (a run folder, a file, a list of them: an ensemble; with engine=ctranslate2 an
    export folder) on `device` (auto, cpu, cuda, ...), checked to form one model."""
    if engine not in choices(Engine):
        raise UserError(f"engine={engine!r} is not one of {', '.join(choices(Engine))}")
    paths = checkpoint_paths(checkpoint)
    return _load_export(paths, device) if engine == "ctranslate2" else _load_checkpoints(paths, device)
