"""Running the recipe's stages: a marker per finished stage, resume of an interrupted one, the record of the run.

A stage is finished when PARENT/STAGE.done exists (written atomically once its command exits 0; it holds the
stage's command, wall-clock and steps, gathered in PARENT/pipeline.json). A rerun skips finished stages whose command
is unchanged, runs the averaging and the results again where theirs changed (e.g. finetune_minutes added), refuses
the other stages that were finished with other settings (choose another parent), and continues an interrupted
stage: a training folder with a last checkpoint is relaunched with trainer.resume=true (a fine-tuning resumes by
itself), and back-translation continues at its last chunk. Each stage's output goes to PARENT/STAGE.log.
"""

import itertools
import json
import shlex
import subprocess
import time
from pathlib import Path

from transformer.core.config import RecipeConfig
from transformer.core.files import atomic_write_text
from transformer.recipe.plan import Stage, StageFailed, final_count, plan
from transformer.runs.run_folder import RunFolder

STATES = {"todo": "", "finished": " (finished)", "changed": " (finished with other settings)"}


def status(stage: Stage, parent: Path) -> str:
    """ "todo", "finished" (its marker holds this command, perhaps with its resume overrides) or "changed"."""
    marker = parent / f"{stage.name}.done"
    if not marker.exists():
        return "todo"

    def key(command: list[str]) -> list[str]:  # a console script by its name: the same from another checkout
        return [Path(command[0]).name, *command[1:]]

    ran = key(json.loads(marker.read_text())["command"])
    return "finished" if ran in (key(stage.command), key([*stage.command, *stage.resume])) else "changed"


def counts(stage: Stage, parent: Path) -> dict[str, int]:
    """What a finished stage made: a training run's steps (from its last checkpoint), the sentences translated."""
    if stage.run_dir is not None:
        from transformer.runs.checkpoint import read_metadata

        return {"steps": int(read_metadata(RunFolder(stage.run_dir).last)["step"])}
    if stage.name == "synthetic":
        from transformer.data.backtranslated import read_manifest

        return {"sentences": int(read_manifest(parent / "synthetic")["lines"]["kept"])}
    return {}


def run_stage(stage: Stage, parent: Path, prefix: str) -> None:
    """Run one stage unless its marker says it is finished; then write the marker."""
    marker, log_path = parent / f"{stage.name}.done", parent / f"{stage.name}.log"
    state = status(stage, parent)
    if state == "finished":
        print(f"{prefix} {stage.name}: finished before, skipped", flush=True)
        return
    if state == "changed" and not stage.redo:
        raise StageFailed(
            f"stage {stage.name} was finished with other settings (see {marker}); choose another parent=, "
            f"or delete {marker} and its output to redo it"
        )
    resumed = stage.run_dir is not None and RunFolder(stage.run_dir).last.exists()
    command = [*stage.command, *stage.resume] if resumed else stage.command
    if stage.before is not None:
        stage.before()
    print(f"{prefix} {stage.name}: {stage.what}{' (continuing)' if resumed else ''} ...", end=" ", flush=True)
    start = time.monotonic()
    with open(log_path, "a") as log:
        returncode = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
    minutes = (time.monotonic() - start) / 60
    if returncode != 0:
        print("failed", flush=True)
        raise StageFailed(f"stage {stage.name} failed (exit {returncode}); see {log_path}")
    made = counts(stage, parent)
    record = {"minutes": round(minutes, 2), "resumed": resumed, **made, "log": str(log_path), "command": command}
    atomic_write_text(marker, json.dumps(record, indent=2) + "\n")
    detail = "".join(f", {value:,} {key}" for key, value in made.items())
    print(f"done in {minutes:.1f} min{detail}", flush=True)


def write_summary(cfg: RecipeConfig, stages: list[Stage]) -> None:
    """PARENT/pipeline.json: the mode and each finished stage's record (wall-clock, steps, command)."""
    parent = Path(cfg.parent)
    done = {
        s.name: json.loads((parent / f"{s.name}.done").read_text())
        for s in stages
        if (parent / f"{s.name}.done").exists()
    }
    atomic_write_text(parent / "pipeline.json", json.dumps({"mode": cfg.mode, "stages": done}, indent=2) + "\n")


def dry_run(cfg: RecipeConfig) -> None:
    """Print each stage's command and whether it is finished; run nothing."""
    stages = plan(cfg)
    for i, stage in enumerate(stages, start=1):
        state = STATES[status(stage, Path(cfg.parent))]
        print(f"[{i}/{len(stages)}] {stage.name}{state}: {shlex.join(stage.command)}")
    if cfg.finals == "auto" and not final_count(cfg)[1]:
        print(f"(finals=auto: one {cfg.final_minutes:g}-minute final instead if en->fr shows a slow CPU)")


def run(cfg: RecipeConfig) -> None:
    """Run the stages that are not finished, in order, planning again after each; then print val's choice."""
    parent = Path(cfg.parent)
    parent.mkdir(parents=True, exist_ok=True)
    planned = 0
    for i in itertools.count():
        stages = plan(cfg)  # again after each stage: the en->fr stage settles finals=auto
        if planned and len(stages) != planned:
            print(f"plan: {len(stages)} stages now ({final_count(cfg)[1]})", flush=True)
        planned = len(stages)
        if i == len(stages):
            break
        run_stage(stages[i], parent, f"[{i + 1}/{len(stages)}]")
        write_summary(cfg, stages)
    report = parent / "results.md"
    for line in report.read_text().splitlines():
        if line.startswith("Chosen on val"):
            print(line)
    print(f"results in {report}; wall-clock and steps in {parent / 'pipeline.json'}")
