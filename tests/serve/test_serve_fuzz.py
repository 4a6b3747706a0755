"""The service against requests generated from its own OpenAPI schema (schemathesis): no 5xx, answers that conform
to the schema, and a server that still answers and translates afterwards."""

import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="transformer-serve needs the serve extra: pip install -e '.[dev,serve]'")
schemathesis = pytest.importorskip("schemathesis", reason="the fuzz tests need the test extra: pip install '.[test]'")
import httpx  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.serve.serving import offline, running_server, write_checkpoint  # noqa: E402
from transformer.core.config import DecodingConfig  # noqa: E402
from transformer.decoding.translator import Translator  # noqa: E402
from transformer.runs.checkpoint import load_checkpoint  # noqa: E402

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
LIMITS = dict(max_chars=40, max_texts=3, max_sentences=8, timeout_s=30.0)  # small, so each request is cheap
DEFAULTS = DecodingConfig(strategy="greedy", max_len_b=6)
MODES = {"get": ("positive",), "post": ("positive", "negative")}


def fuzz(url: str, examples: int) -> Counter:
    """`examples` generated requests per route and mode (positive: valid by the schema; negative: not), each
    answer checked; the outcomes counted as (route, mode, status)."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    outcomes: Counter = Counter()
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in MODES[operation.method.lower()]:
            fuzz_operation(url, operation, mode, examples, outcomes)
    assert httpx.get(f"{url}/health").json()["status"] == "ok"
    return outcomes


def fuzz_operation(url: str, operation, mode: str, examples: int, outcomes: Counter) -> None:
    """`examples` requests to one route in one mode, each answer checked and counted in `outcomes`."""

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=schemathesis.GenerationMode(mode)))
    def call(case) -> None:
        response = case.call(base_url=url)
        outcomes[(operation.label, mode, response.status_code)] += 1
        case.validate_response(response, checks=CHECKS)

    call()


def served_after(url: str, outcomes: Counter) -> dict[str, int]:
    """Status counts of `outcomes`; asserts that valid translation requests mostly reached the translator."""
    statuses = Counter()
    for (_, _, status), n in outcomes.items():
        statuses[str(status)] += n
    translated = sum(n for (label, mode, status), n in outcomes.items() if mode == "positive" and status == 200)
    valid = sum(n for (label, mode, _), n in outcomes.items() if mode == "positive" and label.startswith("POST"))
    print(
        f"\n{sum(statuses.values())} generated requests: {dict(sorted(statuses.items()))}; "
        f"{translated} of {valid} valid POST requests answered 200"
    )
    assert not any(status.startswith("5") for status in statuses)
    assert translated > valid // 2
    return statuses


def test_generated_requests_get_no_5xx_and_answers_that_conform(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "tiny.safetensors")
    with running_server(checkpoint, DEFAULTS, max_wait_ms=0.0, **LIMITS) as (url, service):
        outcomes = fuzz(url, examples=15)
        served_after(url, outcomes)
        answer = httpx.post(f"{url}/translate", json={"text": "un chien rouge."}, timeout=60).json()
        assert answer["translations"][0]["text"] == offline(service, ["un chien rouge."])[0]


@pytest.mark.slow
def test_the_console_script_holds_against_two_thousand_generated_requests(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "tiny.safetensors")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    limits = [f"serve.{key}={value}" for key, value in LIMITS.items()]
    args = [f"checkpoint={checkpoint}", f"serve.port={port}", "serve.num_threads=1", "serve.max_wait_ms=0", *limits]
    args += ["decoding=greedy", f"decoding.max_len_b={DEFAULTS.max_len_b}"]
    script = Path(sys.executable).parent / "transformer-serve"
    process = subprocess.Popen([str(script), *args], stderr=open(tmp_path / "log", "w"), cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                info = httpx.get(f"{url}/info", timeout=30).json()
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "log").read_text()
                time.sleep(0.2)
        start = time.monotonic()
        outcomes = fuzz(url, examples=500)
        statuses = served_after(url, outcomes)
        print(f"in {time.monotonic() - start:.0f} s")
        assert sum(statuses.values()) >= 2000
        answer = httpx.post(f"{url}/translate", json={"text": "un chien rouge."}, timeout=60).json()
        ckpt = load_checkpoint(str(checkpoint))
        cfg = DecodingConfig(**info["decoding"])
        expected = Translator(ckpt.model, ckpt.tokenizer, cfg).translate(["un chien rouge."])
        assert answer["translations"][0]["text"] == expected[0]
    finally:
        process.terminate()
        process.wait(timeout=60)
