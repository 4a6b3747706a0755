"""Load on loopback: 50 concurrent clients x 10 requests, each with its own text and settings, no mix-ups; a minute
of steady load (scripts/soak_serve.py) without errors or growing memory; oneDNN's kernel cache kept small."""

import asyncio
import dataclasses
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("fastapi", reason="transformer-serve needs the serve extra: pip install -e '.[dev,serve]'")
import httpx  # noqa: E402

from tests import ROOT
from tests.conftest import WORDS_FR  # noqa: E402
from tests.serve.serving import running_server, write_checkpoint  # noqa: E402
from transformer.decoding.translator import Translator  # noqa: E402

CLIENTS, REQUESTS = 50, 10
SOAK = ROOT / "scripts" / "soak_serve.py"


def request_body(k: int) -> dict:
    """Request k's distinct text and settings: beam 1-3, n-best 1-2, every 7th sampled with seed k."""
    n = len(WORDS_FR)
    text = f"{WORDS_FR[k % n]} {WORDS_FR[k // n % n]} {WORDS_FR[k // n // n]}"
    if k % 7 == 0:
        return {"text": text, "sampling": True, "seed": k}
    beam = 1 + k % 3
    return {"text": text, "beam_size": beam, "n_best": min(beam, 1 + k % 2)}


def expected(service, bodies: list[dict]) -> list[list[str]]:
    """Each body's n-best texts as offline translation gives them (sampling: with the request's seed), one
    `Translator` per setting."""
    translators: dict[str, Translator] = {}
    out = []
    for body in bodies:
        if body.get("sampling"):
            cfg = dataclasses.replace(service.defaults, strategy="sample", n_best=1, seed=body["seed"])
        else:
            cfg = dataclasses.replace(service.defaults, beam_size=body["beam_size"], n_best=body["n_best"])
        translator = translators.setdefault(repr(cfg), Translator(service.model, service.tokenizer, cfg))
        out.append([text for text, _ in translator.translate_nbest([body["text"]])[0]])
    return out


@pytest.mark.slow
def test_fifty_concurrent_clients_each_get_their_own_answers(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "tiny.safetensors")
    bodies = [request_body(k) for k in range(CLIENTS * REQUESTS)]
    assert len({b["text"] for b in bodies}) == len(bodies)

    async def client(url: str, c: int) -> list[dict]:
        async with httpx.AsyncClient(timeout=120) as http:
            answers = []
            for r in range(REQUESTS):
                response = await http.post(f"{url}/translate", json=bodies[c * REQUESTS + r])
                assert response.status_code == 200, response.text
                answers.append(response.json())
            return answers

    async def load(url: str) -> list[dict]:
        per_client = await asyncio.wait_for(asyncio.gather(*(client(url, c) for c in range(CLIENTS))), timeout=400)
        return [answer for answers in per_client for answer in answers]

    with running_server(checkpoint, max_wait_ms=20.0) as (url, service):
        answers = asyncio.run(load(url))
        wanted = expected(service, bodies)
    shared = 0
    for body, answer, texts in zip(bodies, answers, wanted):
        sentence = answer["translations"][0]["sentences"][0]
        assert sentence["source"] == body["text"]
        assert [h["text"] for h in sentence["n_best"]] == texts, body
        shared += answer["batch"]["requests"] > 1
    assert shared > len(bodies) // 4  # dynamic batching happened


@pytest.mark.slow
def test_a_minute_of_steady_load_answers_every_request_with_memory_that_stays_flat(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "tiny.safetensors")
    sentences = tmp_path / "sentences.fr"
    sentences.write_text("".join(request_body(k)["text"] + "\n" for k in range(200)))
    out = {"--json": tmp_path / "soak.json", "--plot": tmp_path / "soak.png"}
    command = [sys.executable, str(SOAK), "--checkpoint", str(checkpoint), "--file", str(sentences)]
    command += ["--minutes", "1", "--window-s", "10", "--threads", "1", *(str(x) for kv in out.items() for x in kv)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    soak = json.loads(out["--json"].read_text())
    assert len(soak["windows"]) == 6 and all(w["requests"] > 0 for w in soak["windows"])
    assert soak["errors"] == 0 and soak["requests"] == sum(w["requests"] for w in soak["windows"])
    assert soak["memory_growth"] <= 0.05
    assert out["--plot"].read_bytes().startswith(b"\x89PNG")
    print(result.stdout)


KERNELS_PROBE = """
import os, sys
from transformer.cli import serve
sys.argv = ["transformer-serve", "checkpoint=nowhere"]
try:
    serve.main()
except SystemExit:
    pass
print(os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY"))
"""


@pytest.mark.parametrize("environment, kept", [(None, "8"), ("64", "64")])
def test_the_server_keeps_few_onednn_kernels_unless_the_environment_says(environment, kept, tmp_path):
    """oneDNN's default cache of 1,024 kernels (one per product shape) grew a server's memory 9.7% in an hour of
    steady load (docs/serving.md#an-hour-of-steady-load); the server bounds it before it loads a model."""
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    if environment is not None:
        env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = environment
    probe = subprocess.run(
        [sys.executable, "-c", KERNELS_PROBE], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert "checkpoint nowhere does not exist" in probe.stderr  # the model load failed after the setting
    assert probe.stdout.strip().splitlines()[-1] == kept
