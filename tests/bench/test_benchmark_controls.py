"""scripts/benchmark_controls.py: constraints drawn as the papers draw them, the prefix measures, a tiny run."""

import importlib.util
import json
import os
import random
import subprocess
import sys

import pytest

from tests import ROOT
from tests.conftest import write_corpus
from transformer.bench.controls import (
    completions_of,
    coverage,
    draw_constraints,
    half_prefixes,
    next_word_accuracy,
)
from transformer.bench.tiny import write_checkpoint


def test_drawn_constraints_are_reference_phrases_the_hypothesis_lacks():
    reference = "A man in a blue shirt is standing on a ladder ."
    hypothesis = "A man in a red shirt stands on a chair ."
    for seed in range(20):
        phrases = draw_constraints(reference, hypothesis, random.Random(seed))
        assert 1 <= len(phrases) <= 3 and len(set(phrases)) == len(phrases)
        for phrase in phrases:
            assert phrase in reference and 1 <= len(phrase.split()) <= 3 and "." not in phrase
            assert f" {phrase} " not in f" {hypothesis} "
    assert draw_constraints(reference, hypothesis, random.Random(3)) == draw_constraints(
        reference, hypothesis, random.Random(3)
    )
    assert draw_constraints("A dog .", "A dog .", random.Random(0)) == []


def test_prefix_measures():
    prefixes, rests, nexts = half_prefixes(["a dog runs in the park", "one"])
    assert prefixes == ["a dog runs ", ""] and rests == ["in the park", "one"] and nexts == ["in", "one"]
    completions = completions_of(["a dog runs in a park", "two"], prefixes)
    assert completions == ["in a park", "two"]
    assert next_word_accuracy(completions, nexts) == 0.5
    assert coverage(["a red dog", "the cats"], [["red dog"], ["cat", "the"]]) == (2, 3)


@pytest.mark.slow  # a checkpoint, an export and every search twice
def test_a_tiny_run_ends_with_one_json_line_and_ctranslate2_forcing_pieces_agrees(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "tiny.safetensors")
    write_corpus(tmp_path, "test_2016_flickr", 8, 3, gz=True)
    command = [sys.executable, str(ROOT / "scripts" / "benchmark_controls.py"), "--checkpoint", str(checkpoint)]
    command += ["--data", str(tmp_path), "--splits", "test_2016_flickr", "--rounds", "1", "--latency-sentences", "2"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([*command, "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    record = result["splits"]["test_2016_flickr"]
    constraints, prefix = record["constraints"], record["prefix"]
    assert constraints["sentences"] == 8 and 0 < constraints["found"] <= constraints["phrases"]
    assert set(constraints["slowdown"]) == {"32", "1"}
    if importlib.util.find_spec("ctranslate2"):
        assert prefix["ctranslate2"] == pytest.approx(prefix["ours_forcing_pieces"])
