"""How a training run starts: from scratch, resumed (`trainer.resume`), or from a trained model's weights and
vocabulary (`trainer.init_from`, fine-tuning) on its run folder's first launch; later launches resume the run."""

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from transformer.core.errors import UserError
from transformer.data.corpus import training_corpora
from transformer.models.factory import model_config
from transformer.runs.checkpoint import read_header, resolve_checkpoint
from transformer.runs.run_folder import RunFolder
from transformer.training.keeper import resume_file

log = logging.getLogger(__name__)

TRAINING_ONLY = ("dropout", "attention_dropout", "activation_dropout")  # model settings a fine-tuning may change
RNN_SETTINGS = ("family", "rnn", "tie_embeddings", "max_positions")  # what an RNN is built from, dropout aside


@dataclass(frozen=True)
class Start:
    """Where a run's weights come from: a resumable checkpoint it continues, one it fine-tunes, or neither."""

    resume: Path | None = None
    init: Path | None = None

    @property
    def checkpoint(self) -> Path | None:
        """The checkpoint whose SentencePiece model(s) tokenize the run's corpus; None: train new ones."""
        return self.resume or self.init


def launched_before(run_dir: Path) -> Path | None:
    """The run folder's resumable checkpoint, if a launch of it saved one."""
    return RunFolder(run_dir).resumable()


def plan_start(run_dir: Path, tcfg: DictConfig) -> Start:
    """`trainer.resume`'s checkpoint; else `trainer.init_from`'s, unless this run folder already has a resumable
    checkpoint: then the run was launched before and is resumed (so a fine-tuning never restarts by accident)."""
    if tcfg.resume:
        return Start(resume=resume_file(run_dir, tcfg.resume))
    if not tcfg.init_from:
        return Start()
    last = launched_before(run_dir)
    if last is not None:
        log.info(
            "resuming this run from %s: trainer.init_from applies to a run folder's first launch only "
            "(to fine-tune afresh, give another hydra.run.dir)",
            last,
        )
        return Start(resume=last)
    return Start(init=resolve_checkpoint(tcfg.init_from))


def _flat(settings: dict, prefix: str = "") -> dict:
    """Nested settings as dotted names; booleans written as on the command line (true, false)."""
    out = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value).lower() if isinstance(value, bool) else value
    return out


def architecture(model) -> dict:
    """The model settings that shape its weights (dotted names): all but the dropouts, and for each family only
    what it is built from."""
    settings = dataclasses.asdict(model_config(model))
    if settings["family"] == "rnn":
        settings = {key: settings[key] for key in RNN_SETTINGS}
    else:
        settings = {key: value for key, value in settings.items() if key not in (*TRAINING_ONLY, "rnn")}
    return _flat(settings)


def model_differences(mine, theirs) -> list[str]:
    """`model.KEY=VALUE (the checkpoint's: VALUE)` for each architecture setting of `mine` that `theirs` lacks."""
    ours, its = architecture(mine), architecture(theirs)
    keys = ["family"] if ours["family"] != its["family"] else [key for key in ours if ours[key] != its[key]]
    return [f"model.{key}={ours[key]} (the checkpoint's: {its[key]})" for key in keys]


def check_init_from(cfg: DictConfig) -> None:
    """Refuse `trainer.init_from` before any work when the model settings differ from the checkpoint's architecture,
    when its vocabularies are per side and its direction is the other one, or when its vocabulary lacks a corpus tag
    (with `trainer.resume` it is config_checks' refusal)."""
    file, config, tokenizer = read_header(cfg.trainer.init_from)
    differences = model_differences(cfg.model, config.model)
    if differences:
        raise UserError(
            f"trainer.init_from={cfg.trainer.init_from}: {'; '.join(differences)}; a fine-tuned model keeps its "
            "architecture, so set these as the checkpoint has them (dropouts and every optim.*, trainer.* and "
            "data.* setting may differ)"
        )
    theirs, ours = (config.data.src_lang, config.data.tgt_lang), (cfg.data.src_lang, cfg.data.tgt_lang)
    if theirs == ours[::-1] and not tokenizer.joint:
        raise UserError(
            f"trainer.init_from={cfg.trainer.init_from}: the checkpoint translates {'->'.join(theirs)} with one "
            f"vocabulary per side, so its source vocabulary is {theirs[0]}'s; start from a model of "
            f"{'->'.join(ours)}, or one with a joint vocabulary (data.tokenizer.joint=true)"
        )
    tags = [
        ("data.tag" if c.name == cfg.data.name else f"data.extra_train.{c.name}.tag", c.tag)
        for c in training_corpora(cfg.data)
    ]
    for key, tag in [*tags, ("decoding.tag", cfg.decoding.tag)]:
        if tag and tag not in tokenizer.tags:
            has = f"its tags: {', '.join(tokenizer.tags)}" if tokenizer.tags else "it has no tags"
            raise UserError(
                f"{key}={tag}: the vocabulary of {file} lacks the tag <{tag}> ({has}); a fine-tuned model keeps "
                "its vocabulary, so use one of its tags, or train a new model with this one"
            )
