"""transformer-recipe: the stages run in order, finished ones are skipped, an interrupted one resumes."""

import gzip
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from tests import ROOT
from tests.conftest import write_corpus
from transformer.cli import CONFIG_PATH
from transformer.core.config import RecipeConfig
from transformer.recipe import plan, run

STAGES = ["reverse", "synthetic", "final", "finetune", "average", "results"]


def recipe(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "transformer.cli.recipe", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def listed(key: str, values: list) -> str:
    """A list setting as one override, each value quoted and its interpolations escaped: key=["a=1","${x}"]."""
    quoted = ",".join('"' + str(value).replace("${", "\\${") + '"' for value in values)
    return f"{key}=[{quoted}]"


def toy_overrides(tmp: Path) -> list[str]:
    """Training overrides on the toy corpus, either direction (the files are chosen by data.src_lang)."""
    for name, n, seed, gz in (("train", 300, 1, True), ("val", 20, 2, False), ("test", 20, 3, False)):
        write_corpus(tmp, name, n, seed, gz)
    side = {"src": "${data.src_lang}", "tgt": "${data.tgt_lang}"}
    files = [f"data.train.{k}={tmp}/train.{lang}.gz" for k, lang in side.items()]
    files += [f"data.val.{k}={tmp}/val.{lang}" for k, lang in side.items()]
    files += [f"+data.test.toy.{k}={tmp}/test.{lang}" for k, lang in side.items()]
    return [
        "data=files",
        *files,
        f"data.prepared_dir={tmp / 'prepared'}",
        "data.tokenizer.vocab_size=60",
        f"data.shared_dir={tmp / 'no_shared'}",
        "model=tiny",
        "trainer.max_steps=2",
        "trainer.val_every=1",
        "trainer.batch_tokens=256",
        "trainer.progress=false",
    ]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> dict:
    """The bt recipe run once on the toy corpus (greedy back-translation of 60 English lines, one final model and
    its fine-tuning)."""
    tmp = tmp_path_factory.mktemp("recipe")
    _, mono = write_corpus(tmp, "mono", 60, seed=9)
    common = [f"parent={tmp / 'bt'}", "synthetic_decoding=greedy", "average=3", listed("overrides", toy_overrides(tmp))]
    common += [listed("mono", [mono])]
    args = ["finals=1", "finetune_minutes=1", *common]
    return {"parent": tmp / "bt", "args": args, "common": common, "first": recipe(*args)}


@pytest.mark.slow
def test_all_stages_run_in_order_and_are_recorded(pipeline):
    first, parent = pipeline["first"], pipeline["parent"]
    assert first.returncode == 0, first.stderr + first.stdout
    progress = [line for line in first.stdout.splitlines() if line.startswith("[")]
    assert [line.split()[1].rstrip(":") for line in progress] == STAGES
    assert all(" done in " in line for line in progress)
    assert all((parent / f"{stage}.done").is_file() for stage in STAGES)
    summary = json.loads((parent / "pipeline.json").read_text())
    assert list(summary["stages"]) == STAGES
    assert {summary["stages"][run]["steps"] for run in ("reverse", "final", "finetune")} == {2}  # trainer.max_steps
    assert 0 < summary["stages"]["synthetic"]["sentences"] <= 60
    manifest = json.loads((parent / "synthetic" / "backtranslation.json").read_text())
    assert (manifest["src_lang"], manifest["tgt_lang"]) == ("fr", "en") and manifest["inputs"][0].endswith("mono.en")
    report = (parent / "results.md").read_text().splitlines()
    rows = [row.split(" | ") for row in report if row.startswith(f"| {parent}/")]
    models = ["final", "finetune", f"final + {parent}/finetune", "finetune/checkpoints/avg_last3.safetensors"]
    assert [(row[0], row[3]) for row in rows[:4]] == [(f"| {parent}/{model}", "val") for model in models]
    chosen = [line for line in report if line.startswith("Chosen on val (beam 5")]
    assert len(chosen) == 1 and chosen[0] in first.stdout.splitlines()  # the report's choice, printed at the end
    model = chosen[0].split(": ", 1)[1].split(", val ")[0]
    assert rows[4:] and all(row[0] == f"| {model}" and row[3] != "val" for row in rows[4:])  # its test sets only


@pytest.mark.slow
def test_a_rerun_skips_every_finished_stage(pipeline):
    before = {stage: (pipeline["parent"] / f"{stage}.done").stat().st_mtime_ns for stage in STAGES}
    again = recipe(*pipeline["args"])
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("finished before, skipped") == len(STAGES)
    assert {stage: (pipeline["parent"] / f"{stage}.done").stat().st_mtime_ns for stage in STAGES} == before


@pytest.mark.slow
def test_an_interrupted_training_stage_resumes(pipeline):
    parent = pipeline["parent"]
    for stage in STAGES[2:]:  # as if killed during final/: a run folder, no marker
        (parent / f"{stage}.done").unlink()
    again = recipe(*pipeline["args"])
    assert again.returncode == 0, again.stderr
    lines = {line.split()[1].rstrip(":"): line for line in again.stdout.splitlines() if line.startswith("[")}
    assert all("skipped" in lines[stage] for stage in ("reverse", "synthetic"))
    assert "(continuing)" in lines["final"] and "(continuing)" in lines["finetune"] and " done in " in lines["results"]
    records = json.loads((parent / "pipeline.json").read_text())["stages"]
    assert records["final"]["resumed"] and "trainer.resume=true" in records["final"]["command"]
    assert records["finetune"]["resumed"] and "trainer.resume=true" not in records["finetune"]["command"]  # init_from


@pytest.mark.slow
def test_a_rerun_with_other_settings_redoes_only_what_keeps_no_state(pipeline):
    parent = pipeline["parent"]
    averaged = recipe(*pipeline["args"], "average=2")  # the averaging and the results change, nothing else
    assert averaged.returncode == 0, averaged.stderr
    lines = {line.split()[1].rstrip(":"): line for line in averaged.stdout.splitlines() if line.startswith("[")}
    assert all("skipped" in lines[stage] for stage in STAGES[:4])
    assert all(" done in " in lines[stage] for stage in ("average", "results"))
    assert (parent / "finetune" / "checkpoints" / "avg_last2.safetensors").is_file()
    before = {stage: (parent / f"{stage}.done").stat().st_mtime_ns for stage in STAGES}
    reweighted = recipe(*pipeline["args"], "average=2", "weight=0.5")  # final/ was trained at weight 0.25
    assert reweighted.returncode == 2 and reweighted.stderr.count("\n") == 1
    assert reweighted.stderr.startswith("error: stage final was finished with other settings")
    assert {stage: (parent / f"{stage}.done").stat().st_mtime_ns for stage in STAGES} == before


@pytest.mark.slow
def test_a_second_final_model_reuses_the_finished_stages_and_is_ensembled(pipeline):
    parent = pipeline["parent"]  # final/ ran for 58.5 minutes (at most): two finals in 117 minutes keep it
    two = recipe(*pipeline["common"], "finals=2", "final_minutes=117")
    assert two.returncode == 0, two.stderr
    lines = {line.split()[1].rstrip(":"): line for line in two.stdout.splitlines() if line.startswith("[")}
    assert list(lines) == ["reverse", "synthetic", "final", "final2", "average", "average2", "results"]
    assert all("skipped" in lines[stage] for stage in ("reverse", "synthetic", "final"))
    assert all(" done in " in lines[stage] for stage in ("final2", "average", "average2", "results"))
    assert json.loads((parent / "final2.done").read_text())["command"][-1] == "trainer.seed=2"
    report = (parent / "results.md").read_text()
    averaged = [f"{parent}/{run}/checkpoints/avg_last3.safetensors" for run in ("final", "final2")]
    for model in (f"{parent}/final + {parent}/final2", " + ".join(averaged)):
        assert any(row.startswith(f"| {model} | ") for row in report.splitlines()), model


@pytest.mark.slow
def test_a_failed_stage_stops_the_pipeline_with_one_error_line(tmp_path):
    _, mono = write_corpus(tmp_path, "mono", 5, seed=9)
    parent = tmp_path / "bt"
    overrides = listed("overrides", [*toy_overrides(tmp_path), "trainer.no_such=1"])
    result = recipe(f"parent={parent}", overrides, listed("mono", [mono]))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and result.stderr.startswith("error: stage reverse failed")
    assert str(tmp_path / "bt" / "reverse.log") in result.stderr
    assert not (tmp_path / "bt" / "reverse.done").exists() and not (tmp_path / "bt" / "synthetic").exists()


def test_dry_run_prints_each_stage_command_and_runs_nothing(tmp_path):
    parent = tmp_path / "st"
    options = ["finetune_minutes=5", "average=3", "dry_run=true", listed("overrides", ["model=tiny"])]
    result = recipe("mode=st", f"parent={parent}", *options)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "[1/6] teacher",
        "[2/6] synthetic",
        "[3/6] final",
        "[4/6] finetune",
        "[5/6] average",
        "[6/6] results",
    ]
    assert "+experiment=multi30k_cpu_enfr" in lines[0] and "train.5.en.gz" in lines[1]  # Task 2 by default
    assert f"+data.extra_train.st.src={parent}/synthetic/train.en" in lines[2] and "model=tiny" in lines[2]
    assert f"trainer.init_from={parent}/final" in lines[3]
    assert f"checkpoints=[{parent}/final,{parent}/finetune,[{parent}/final,{parent}/finetune]," in lines[5]
    assert not parent.exists()


def test_the_final_stage_has_its_own_experiment_and_the_fine_tuning_make_trains(tmp_path):
    options = ["finals=1", "finetune_minutes=10", "noise=0.1"]
    result = recipe(f"parent={tmp_path / 'bt'}", "dry_run=true", *options, listed("overrides", ["trainer.seed=7"]))
    assert result.returncode == 0, result.stderr
    commands = {line.split(":")[0].split()[1]: line for line in result.stdout.splitlines()}
    assert "+experiment=multi30k_cpu_enfr " in commands["reverse"]
    assert "+experiment=multi30k_cpu_fren_bt trainer.max_minutes=58.5 " in commands["final"]
    assert " +data.extra_train.bt.noise=0.1 " in commands["final"] and "noise" not in commands["finetune"]
    assert "+experiment=multi30k_cpu_fren trainer.max_minutes=10 " in commands["finetune"]
    assert all(commands[name].endswith(" trainer.seed=7") for name in ("reverse", "final", "finetune"))


def test_by_default_bt_ensembles_two_finals_in_58_5_minutes_with_their_own_seeds_st_trains_one_for_55(tmp_path):
    stages = {}
    for mode in ("bt", "st"):
        seed = listed("overrides", ["trainer.seed=7"])
        result = recipe(f"mode={mode}", f"parent={tmp_path / mode}", "dry_run=true", seed)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        stages[mode] = {line.split(":")[0].split()[1]: line for line in lines if line.startswith("[")}
    assert all("finetune" not in commands for commands in stages.values())
    assert [name for name in stages["bt"] if name.startswith("final")] == ["final", "final2"]
    assert all(" trainer.max_minutes=29.25 " in stages["bt"][name] for name in ("final", "final2"))
    assert stages["bt"]["final"].endswith(" trainer.seed=7") and stages["bt"]["final2"].endswith(" trainer.seed=2")
    bt = tmp_path / "bt"
    assert f"checkpoints=[{bt}/final,{bt}/final2,[{bt}/final,{bt}/final2]]" in stages["bt"]["results"]  # no averages
    assert "final2" not in stages["st"] and " trainer.max_minutes=55 " in stages["st"]["final"]
    assert all(" val=true tests=chosen " in commands["results"] for commands in stages.values())
    assert all(not name.startswith("average") for commands in stages.values() for name in commands)
    assert stages["bt"]["synthetic"].endswith(" decoding=greedy")  # chosen on val for bt; st's runs used beam
    assert stages["st"]["synthetic"].endswith(" decoding=beam")


def test_each_final_model_composes_with_its_own_seed_whatever_the_overrides_say(tmp_path):
    result = recipe(f"parent={tmp_path / 'bt'}", "dry_run=true", listed("overrides", ["trainer.seed=7"]))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("[")]
    commands = {line.split(":")[0].split()[1]: line.split(": ", 1)[1] for line in lines}
    seeds = []
    for name in ("final", "final2"):  # Hydra applies repeated overrides in order: the last one holds
        overrides = [o for o in shlex.split(commands[name])[1:] if not o.startswith("hydra.")]
        with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
            seeds.append(compose("train", overrides=overrides).trainer.seed)
    assert seeds == [7, 2]


def test_fine_tuning_with_several_finals_is_one_error_line(tmp_path):
    result = recipe(f"parent={tmp_path / 'bt'}", "dry_run=true", "finetune_minutes=5")
    assert result.returncode == 2
    assert result.stderr.startswith("error: finetune_minutes") and result.stderr.count("\n") == 1


def test_a_missing_mono_file_is_one_error_line(tmp_path):
    result = recipe("dry_run=true", listed("mono", [tmp_path / "nothing.en"]), listed("overrides", ["model=tiny"]))
    assert result.returncode == 2
    assert result.stderr.startswith("error: mono") and result.stderr.count("\n") == 1


def test_task2_files_are_copied_from_the_shared_folder(tmp_path):
    shared = tmp_path / "shared" / "multi30k_task2"
    shared.mkdir(parents=True)
    for k, name in enumerate(plan.TASK2_FILES):
        (shared / name).write_bytes(gzip.compress(f"caption {k}\n".encode()))
    plan.fetch_task2(tmp_path / "data", str(tmp_path / "shared"))
    copies = plan.task2_files(tmp_path / "data")
    assert [path.read_bytes() for path in copies] == [(shared / path.name).read_bytes() for path in copies]


def en_fr_checkpoint(run_dir: Path, steps: int) -> None:
    """A stand-in for the en->fr stage's last checkpoint: only its header, `steps` in 35 training minutes."""
    from safetensors.torch import save_file

    from transformer.runs.checkpoint import FORMAT

    (run_dir / "checkpoints").mkdir(parents=True)
    meta = {"format": FORMAT, "step": str(steps), "train_minutes": "35.0"}
    save_file({"x": torch.zeros(1)}, run_dir / "checkpoints" / "last.safetensors", metadata=meta)


@pytest.mark.parametrize("steps, finals", [(1667, ["final"]), (3784, ["final"]), (5985, ["final", "final2"])])
def test_finals_auto_trains_one_model_after_a_slow_en_fr_stage_two_after_a_fast_one(tmp_path, steps, finals):
    """The en->fr stage's steps a minute settle finals=auto: half of the budget gives 1,400 steps on the slow Zen 3
    measured and 3,200 on the Zen 4 (one model won on val on both), 5,000 on the Zen 5 (the ensemble of two won)."""
    parent = tmp_path / "bt"
    en_fr_checkpoint(parent / "reverse", steps)
    (parent / "reverse.done").write_text(json.dumps({"command": ["transformer-train"]}))
    result = recipe(f"parent={parent}", "dry_run=true")
    assert result.returncode == 0, result.stderr
    names = [line.split(":")[0].split()[1] for line in result.stdout.splitlines()]
    assert [name for name in names if name.startswith("final")] == finals and names[-1] == "results"
    minutes = 58.5 / len(finals)
    assert all(f" trainer.max_minutes={minutes:g} " in line for line in result.stdout.splitlines() if "] final" in line)
    one, two = f"{parent}/final", f"{parent}/final,{parent}/final2"
    assert f"checkpoints=[{one if len(finals) == 1 else f'{two},[{two}]'}]" in result.stdout  # the ensemble with two


def test_the_run_replans_after_the_en_fr_stage_and_says_why_the_stage_count_changed(tmp_path, capsys, monkeypatch):
    """Before en->fr has run, finals=auto plans two finals; a slow en->fr stage leaves one, and a plan line says so
    before the next stage runs (the stages themselves are recorded, not run)."""
    _, mono = write_corpus(tmp_path, "mono", 5, seed=3)
    parent, ran = tmp_path / "bt", []

    def record(stage, parent, prefix):
        ran.append(f"{prefix} {stage.name}")
        if stage.name == "reverse":
            en_fr_checkpoint(stage.run_dir, 1667)  # in 35 minutes: the slow Zen 3
        (parent / f"{stage.name}.done").write_text(json.dumps({"command": stage.command}))
        if stage.name == "results":
            (parent / "results.md").write_text("Chosen on val: final\n")

    monkeypatch.setattr(run, "run_stage", record)
    run.run(plan.settled(RecipeConfig(parent=str(parent), mono=[str(mono)])))
    assert ran == ["[1/5] reverse", "[2/4] synthetic", "[3/4] final", "[4/4] results"]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "plan: 4 stages now (finals=auto: en->fr made 48 steps a minute)"
    assert out[1] == "Chosen on val: final"


def shared_tatoeba(tmp: Path) -> Path:
    """A shared folder holding a toy Tatoeba train split (tatoeba/train.fr.gz, train.en.gz)."""
    (tmp / "shared" / "tatoeba").mkdir(parents=True)
    write_corpus(tmp / "shared" / "tatoeba", "train", 40, seed=5, gz=True)
    return tmp / "shared"


@pytest.mark.slow
def test_a_warm_start_trains_en_fr_both_ways_and_the_final_starts_from_its_weights(tmp_path):
    """warm_start=true: reverse/ learns both directions (its prepared data holds each corpus reversed too), and final/
    starts from it (keeping its vocabulary), here with Tatoeba as a third corpus (tatoeba=W)."""
    from transformer.runs.checkpoint import load_checkpoint

    _, mono = write_corpus(tmp_path, "mono", 30, seed=9)
    parent = tmp_path / "bt"
    tatoeba = ["tatoeba=0.5", f"shared_dir={shared_tatoeba(tmp_path)}"]
    args = [f"parent={parent}", "warm_start=true", "finals=1", *tatoeba, listed("overrides", toy_overrides(tmp_path))]
    args += [listed("mono", [mono])]
    result = recipe(*args)
    assert result.returncode == 0, result.stderr + result.stdout
    commands = json.loads((parent / "pipeline.json").read_text())["stages"]
    assert "data.both_directions=true" in commands["reverse"]["command"]
    assert f"trainer.init_from={parent}/reverse" in commands["final"]["command"]
    prepared = [json.loads(p.read_text()) for p in (tmp_path / "prepared").glob("*/meta.json")]
    both = [meta for meta in prepared if meta["settings"].get("both_directions")]
    assert len(both) == 1 and [c["name"] for c in both[0]["corpora"]] == ["files", "files-reversed"]
    assert both[0]["corpora"][0]["pairs"] == both[0]["corpora"][1]["pairs"] > 0
    final_data = [meta for meta in prepared if "tatoeba" in [c["name"] for c in meta["corpora"]]]
    assert len(final_data) == 1, [[c["name"] for c in meta["corpora"]] for meta in prepared]
    reverse = load_checkpoint(str(parent / "reverse"))
    final = load_checkpoint(str(parent / "final" / "checkpoints" / "last.safetensors"))
    assert final.tokenizer.same_models(reverse.tokenizer)
    assert final.config.data.src_lang == "fr" and reverse.config.data.src_lang == "en"
    again = recipe(*args)  # finished: every stage skipped, none refused for its init_from
    assert again.returncode == 0 and again.stdout.count("finished before, skipped") == 4, again.stderr


def test_tatoeba_joins_only_the_final_runs_in_their_direction_at_its_weight(tmp_path):
    shared = shared_tatoeba(tmp_path)
    finals = {}
    for mode in ("bt", "st"):
        options = ["finals=1", "finetune_minutes=10", "tatoeba=0.05", f"shared_dir={shared}"]
        result = recipe(f"mode={mode}", f"parent={tmp_path / mode}", "dry_run=true", *options)
        assert result.returncode == 0, result.stderr
        commands = {line.split(":")[0].split()[1]: line.split(": ", 1)[1] for line in result.stdout.splitlines()}
        assert all("extra_train.tatoeba" not in commands[name] for name in commands if name != "final")
        overrides = [o for o in shlex.split(commands["final"])[1:] if not o.startswith("hydra.")]
        with initialize_config_dir(config_dir=CONFIG_PATH, version_base="1.3"):
            finals[mode] = compose("train", overrides=overrides).data.extra_train.tatoeba
    tatoeba = shared / "tatoeba"
    assert finals["bt"] == {"src": f"{tatoeba}/train.fr.gz", "tgt": f"{tatoeba}/train.en.gz", "weight": 0.05}
    assert finals["st"] == {"src": f"{tatoeba}/train.en.gz", "tgt": f"{tatoeba}/train.fr.gz", "weight": 0.05}


@pytest.mark.parametrize("weight", ["0.1", "-1"])
def test_tatoeba_without_its_files_or_with_a_negative_weight_is_one_error_line(tmp_path, weight):
    result = recipe("dry_run=true", f"tatoeba={weight}", f"shared_dir={tmp_path / 'nothing'}")
    assert result.returncode == 2
    assert result.stderr.startswith("error: tatoeba") and result.stderr.count("\n") == 1


def test_a_warm_start_with_a_tag_is_one_error_line(tmp_path):
    result = recipe(f"parent={tmp_path / 'bt'}", "dry_run=true", "warm_start=true", "tag=bt")
    assert result.returncode == 2
    assert result.stderr.startswith("error: warm_start") and result.stderr.count("\n") == 1
