"""scripts/benchmark_decoding.py in its tiniest mode: the table, and the JSON line other scripts read."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer.precision import TRANSLATED_IN, resolve

ROOT = Path(__file__).resolve().parent.parent
RECORD_KEYS = {"engine", "precision", "size", "strategy", "batch", "sent_per_s"}


@pytest.mark.slow  # a process per engine
def test_quick_run_ends_with_one_json_line_of_every_case():
    command = [sys.executable, str(ROOT / "scripts" / "benchmark_decoding.py"), "--quick", "--precisions", "fp32"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run(
        [*command, "--threads", "1", "--no-marian", "--json"], capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert set(result) == {"cpu", "records", "default_precision"}
    assert result["cpu"] in lines[0] and result["default_precision"] == resolve(TRANSLATED_IN, "inference", "cpu")
    engines = [("ours", "fp32")]
    if importlib.util.find_spec("ctranslate2"):
        engines += [("ctranslate2", "fp32"), ("ctranslate2", "int8")]
    wanted = [(e, p, "small", s, b) for s in ("greedy", "beam") for b in (4, 1) for e, p in engines]
    records = result["records"]
    assert [(r["engine"], r["precision"], r["size"], r["strategy"], r["batch"]) for r in records] == wanted
    assert all(set(r) == RECORD_KEYS and r["sent_per_s"] > 0 for r in records)
    assert any(line.startswith("small, beam, 1") and " ms)" in line for line in lines)  # latency per sentence
