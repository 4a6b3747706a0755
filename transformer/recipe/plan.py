"""The recipe's stages: what each mode trains, and the command of every stage under the parent folder."""

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from transformer.core import presets
from transformer.core.config import DataConfig, RecipeConfig
from transformer.core.errors import UserError
from transformer.runs.run_folder import RunFolder

# The transformer modules that import torch (corpus, checkpoint) are imported where they are needed, so that --help,
# dry_run=true and a rerun of a finished pipeline start at once.

TASK2 = "multi30k_task2"
TASK2_URL = (
    "https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a"
    "/data/task2/raw/{split}.{lang}.gz"
)
TASK2_FILES = [f"train.{k}.en.gz" for k in range(1, 6)]
ENSEMBLE_STEPS = 4000  # half-budget steps at en->fr's speed (below): Zen 3 1,400, Zen 4 3,200 lost; Zen 5 5,000 won


@dataclass(frozen=True)
class Mode:
    """What one recipe trains: its en->fr model's folder, the final model's direction, experiments and budget."""

    first: str  # the en->fr model's stage and folder
    verb: str  # how the synthetic side is made: back- or forward-translation
    pair: str  # the final model's direction
    final_experiment: str  # Multi30k plus the synthetic pairs
    tuning_experiment: str  # Multi30k alone: the optional fine-tuning
    final_minutes: float  # the final training's budget, shared by its models
    finals: str  # final models, trained one after another with their own seeds and ensembled; or "auto"
    decoding: str  # how the synthetic side is decoded


# bt: dropout 0.1 for the final run, chosen on val. The whole fr->en training is capped at 60 minutes of wall clock:
# 58.5 minutes of training leave 1.5 for preparing the data and the last validations (a 60-minute budget took 60.9
# minutes on a slow Zen 3, 60.3 on a Zen 5). Two half-budget models (seeds 1234 and 2) ensembled beat one
# full-budget model on val on a Zen 5 (5,400-6,100 steps each), while one model beat their ensemble by 2.7 on a slow
# Zen 3 (1,400-1,500 steps each) and by 0.9 on a Zen 4 (3,400-3,500): "auto" trains two where the en->fr model's speed
# says a half-budget model makes ENSEMBLE_STEPS steps; no fine-tuning (it lowered val beam by 0.53 and 0.61 on a
# Zen 5); greedy back-translation (0.20 ahead of beam on val, a fifth of its time). st: make train's 55 minutes,
# one model, beam. docs/results.md has the runs.
MODES = {
    "bt": Mode("reverse", "back", "fr->en", "multi30k_cpu_fren_bt", "multi30k_cpu_fren", 58.5, "auto", "greedy"),
    "st": Mode("teacher", "forward", "en->fr", "multi30k_cpu_enfr", "multi30k_cpu_enfr", 55, "1", "beam"),
}


class StageFailed(UserError):
    """A stage's command failed, or its input could not be obtained; the message names the stage and its log."""


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline: its command, and how it continues when it was interrupted."""

    name: str
    what: str  # the progress line's description
    command: list[str]
    run_dir: Path | None = None  # a transformer-train run folder: its steps are recorded
    resume: list[str] = field(default_factory=list)  # added to the command when run_dir holds a last checkpoint
    before: Callable[[], None] | None = None  # run first (e.g. fetch the input files)
    redo: bool = False  # run again when it was finished with another command (it keeps no state of its own)


def settled(cfg: RecipeConfig) -> RecipeConfig:
    """`cfg` with its mode's values where it leaves a setting None, checked: a `UserError` names a setting that
    cannot work (before any stage runs)."""
    mode = MODES[cfg.mode]
    cfg = dataclasses.replace(
        cfg,
        parent=cfg.parent or str(Path("outputs") / f"train_{cfg.mode}"),
        final_minutes=mode.final_minutes if cfg.final_minutes is None else cfg.final_minutes,
        finals=mode.finals if cfg.finals is None else str(cfg.finals),
        synthetic_decoding=cfg.synthetic_decoding or mode.decoding,
    )
    if cfg.finals != "auto" and not (cfg.finals.isdigit() and int(cfg.finals) >= 1):
        raise UserError(f"finals={cfg.finals}: give 1 or more final models, or auto")
    if cfg.finals != "1" and cfg.finetune_minutes > 0:
        raise UserError("finetune_minutes fine-tunes one final model: give finals=1 with it")
    if cfg.warm_start and cfg.tag:
        raise UserError("warm_start=true keeps the en->fr model's vocabulary, which has no tags: drop tag= with it")
    decodings = presets.names("decoding")
    if cfg.synthetic_decoding not in decodings:
        raise UserError(f"synthetic_decoding={cfg.synthetic_decoding}: choose one of {', '.join(decodings)}")
    if cfg.tatoeba < 0:
        raise UserError(f"tatoeba={cfg.tatoeba:g}: give a weight above 0, or 0 for no Tatoeba")
    absent = [str(path) for path in tatoeba_files(cfg) if not path.is_file()] if cfg.tatoeba else []
    if absent:
        raise UserError(
            f"tatoeba: no {absent[0]} (Tatoeba has no download source: put its files there, or give "
            "shared_dir=DIR with DIR/tatoeba/)"
        )
    missing = [path for path in cfg.mono or [] if not Path(path).is_file()]
    if missing:
        raise UserError(f"mono: {missing[0]} is no file")
    return cfg


def console(name: str) -> str:
    """A console script of this project: the one beside this Python, else found on PATH."""
    path = Path(sys.executable).parent / name
    return str(path) if path.exists() else name


def task2_files(data_dir: Path) -> list[Path]:
    """The five Multi30k Task 2 English caption files (in data_dir)."""
    return [data_dir / name for name in TASK2_FILES]


def fetch_task2(data_dir: Path, shared_dir: str) -> None:
    """Put the Task 2 files in data_dir: copied from shared_dir/multi30k_task2, else downloaded."""
    from transformer.data.corpus import obtain

    cfg = DataConfig(name=TASK2, dir=str(data_dir), mirror=f"{shared_dir}/{TASK2}", url=TASK2_URL)
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        for path in task2_files(data_dir):
            if not path.exists():
                obtain(cfg, path)
    except UserError as err:
        raise StageFailed(f"stage synthetic: {err}") from None


def training(cfg: RecipeConfig, experiment: str, folder: str, minutes: float, *extra: str) -> list[str]:
    """A transformer-train command for one run folder under the parent."""
    return [
        console("transformer-train"),
        f"+experiment={experiment}",
        f"trainer.max_minutes={minutes:g}",
        *extra,
        f"hydra.run.dir={Path(cfg.parent) / folder}",
        *cfg.overrides,
    ]


def extra_corpus(cfg: RecipeConfig) -> list[str]:
    """The synthetic corpus as `data.extra_train.TAG` of the final run: reversed again for self-training."""
    synthetic, key = Path(cfg.parent) / "synthetic", f"+data.extra_train.{cfg.mode}"
    if cfg.mode == "bt":
        files = [f"{key}.dir={synthetic}"]
    else:  # the folder is a fr->en corpus (the model's French, the original English); st trains en->fr on it
        files = [f"{key}.src={synthetic / 'train.en'}", f"{key}.tgt={synthetic / 'train.fr'}"]
    tag = [f"{key}.tag={cfg.tag}"] if cfg.tag else []
    noise = [f"{key}.noise={cfg.noise:g}"] if cfg.noise else []
    return [*files, *tag, *noise, f"{key}.weight={cfg.weight:g}"]


def tatoeba_files(cfg: RecipeConfig) -> list[Path]:
    """Tatoeba's train split in the final model's direction (source, target), under shared_dir/tatoeba."""
    from transformer.data.corpus import builtin_files  # here: its imports (numpy, tqdm) are not for --help

    return list(builtin_files(Path(cfg.shared_dir) / "tatoeba", "train", *MODES[cfg.mode].pair.split("->")))


def tatoeba_corpus(cfg: RecipeConfig) -> list[str]:
    """With tatoeba=W, Tatoeba's train split as `data.extra_train.tatoeba` of the final runs (none by default)."""
    if not cfg.tatoeba:
        return []
    src, tgt = tatoeba_files(cfg)
    key = "+data.extra_train.tatoeba"
    return [f"{key}.src={src}", f"{key}.tgt={tgt}", f"{key}.weight={cfg.tatoeba:g}"]


def numbered(name: str, n: int) -> list[str]:
    """Stage names for n runs of one kind: final, final2, final3, ..."""
    return [name] + [f"{name}{k}" for k in range(2, n + 1)]


def en_fr_speed(cfg: RecipeConfig) -> float | None:
    """The finished en->fr model's training steps a minute (from its last checkpoint); None before it finished."""
    folder = Path(cfg.parent) / MODES[cfg.mode].first
    if not (Path(cfg.parent) / f"{folder.name}.done").exists():
        return None
    from transformer.runs.checkpoint import read_metadata

    meta = read_metadata(RunFolder(folder).last)
    return int(meta["step"]) / max(float(meta["train_minutes"]), 1e-3)


def final_count(cfg: RecipeConfig) -> tuple[int, str]:
    """`finals`, or with auto two models where the en->fr model's speed gives a half-budget final ENSEMBLE_STEPS
    steps, else one (two until the en->fr stage has run); and why, once auto was settled ("" otherwise)."""
    speed = en_fr_speed(cfg) if cfg.finals == "auto" else None
    if speed is None:
        return (2 if cfg.finals == "auto" else int(cfg.finals)), ""
    n = 2 if speed * cfg.final_minutes / 2 >= ENSEMBLE_STEPS else 1
    return n, f"finals=auto: en->fr made {speed:.0f} steps a minute"


def final_stages(cfg: RecipeConfig, n: int, why: str) -> list[Stage]:
    """The n final models, each trained for its share of final_minutes; final K (K >= 2) with trainer.seed=K."""
    mode, minutes, parent, stages = MODES[cfg.mode], cfg.final_minutes / n, Path(cfg.parent), []
    # A warm start's relaunch resumes by itself (trainer.init_from applies to a run folder's first launch only).
    start = [f"trainer.init_from={parent / mode.first}"] if cfg.warm_start else []
    resume = [] if cfg.warm_start else ["trainer.resume=true"]
    for k, name in enumerate(numbered("final", n), start=1):
        seed = [f"trainer.seed={k}"] if k > 1 else []  # after the overrides: the models differ whatever they say
        notes = ([f"model {k} of {n}"] if n > 1 else []) + ([why] if why else [])
        which = f" ({'; '.join(notes)})" if notes else ""
        corpora = [*extra_corpus(cfg), *tatoeba_corpus(cfg)]
        command = [*training(cfg, mode.final_experiment, name, minutes, *corpora, *start), *seed]
        what = f"training {mode.pair} with the synthetic pairs for {minutes:g} min{which}"
        stages.append(Stage(name, what, command, parent / name, resume))
    return stages


def model_stages(cfg: RecipeConfig, finals: tuple[int, str]) -> list[Stage]:
    """The stages that make models: en->fr, the synthetic corpus, the final runs and the fine-tuning."""
    mode, parent, data_dir = MODES[cfg.mode], Path(cfg.parent), Path(cfg.data_dir)
    mono = cfg.mono or task2_files(data_dir)
    fetch = None if cfg.mono else lambda: fetch_task2(data_dir, cfg.shared_dir)
    both = cfg.warm_start and cfg.mode == "bt"  # the final's direction too: the model it starts from knows it
    stages = [
        Stage(
            mode.first,
            f"training en->fr{' and fr->en' if both else ''} for {cfg.enfr_minutes:g} min",
            training(cfg, "multi30k_cpu_enfr", mode.first, cfg.enfr_minutes, *(["data.both_directions=true"] * both)),
            parent / mode.first,
            ["trainer.resume=true"],
        ),
        Stage(
            "synthetic",
            f"{mode.verb}-translating {len(mono)} file(s) ({cfg.synthetic_decoding})",
            [
                console("transformer-backtranslate"),
                f"checkpoint={parent / mode.first}",
                f"input=[{','.join(map(str, mono))}]",
                f"output={parent / 'synthetic'}",
                f"decoding={cfg.synthetic_decoding}",
            ],
            before=fetch,
        ),
        *final_stages(cfg, *finals),
    ]
    if cfg.finetune_minutes > 0:  # a relaunch of an init_from run folder resumes it by itself
        finetune = training(
            cfg, mode.tuning_experiment, "finetune", cfg.finetune_minutes, f"trainer.init_from={parent / 'final'}"
        )
        what = f"fine-tuning final/ on Multi30k for {cfg.finetune_minutes:g} min"
        stages.append(Stage("finetune", what, finetune, parent / "finetune"))
    return stages


def ensemble(runs: list[Path]) -> list[str]:
    """The models as `checkpoints=[...]` entries, and their ensemble when there are several."""
    models = [str(run) for run in runs]
    return [*models, f"[{','.join(models)}]"] if len(models) > 1 else models


def closing_stages(cfg: RecipeConfig, n_finals: int) -> list[Stage]:
    """Averaging the last checkpoints of each last run (unless average=0), then every model on every test set:
    the final models (and finetune/) with their ensemble, and the averages with theirs."""
    parent = Path(cfg.parent)
    finals = [parent / name for name in numbered("final", n_finals)]
    tuned = [parent / "finetune"] if cfg.finetune_minutes > 0 else []
    last_runs = (tuned or finals) if cfg.average > 0 else []
    averages = [RunFolder(run).average(last=cfg.average) for run in last_runs]
    stages = [
        Stage(
            name,
            f"averaging the last {cfg.average} checkpoints of {run.name}/",
            [console("transformer-average"), f"checkpoints=[{run}]", f"last={cfg.average}", f"output={averaged}"],
            redo=True,
        )
        for name, run, averaged in zip(numbered("average", len(last_runs)), last_runs, averages)
    ]
    models = ensemble(finals + tuned) + ensemble(averages)
    results = [
        console("transformer-results"),
        f"checkpoints=[{','.join(models)}]",
        "decodings=[beam]",
        "val=true",  # the val rows: the choice among the models
        f"tests={cfg.test_models}",
        f"output={parent / 'results.md'}",
    ]
    scope = "on every test set and val" if cfg.test_models == "all" else "on val, the one it chooses on every test set"
    stages.append(Stage("results", f"evaluating {len(models)} model(s) {scope}, beam 5", results, redo=True))
    return stages


def plan(cfg: RecipeConfig) -> list[Stage]:
    """The stages of this run, in order (`cfg` settled)."""
    finals = final_count(cfg)  # reads the en->fr stage's checkpoint once
    return model_stages(cfg, finals) + closing_stages(cfg, finals[0])
