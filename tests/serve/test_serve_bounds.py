"""Bounds a hostile client cannot get around: body size, sentences, characters, beam and n-best, time, waiting
requests; no route touches a path a client names; loopback by default."""

import asyncio
import json
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="transformer-serve needs the serve extra: pip install -e '.[dev,serve]'")
import httpx  # noqa: E402

from tests.serve.serving import offline, running_server, write_checkpoint  # noqa: E402
from transformer.core.config import ServeSettings  # noqa: E402
from transformer.serve import service as service_module  # noqa: E402
from transformer.serve.schemas import AttentionRequest, TranslateRequest  # noqa: E402

LIMITS = dict(max_chars=100, max_texts=3, max_sentences=5, max_wait_ms=0.0)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("bounds") / "tiny.safetensors")


@pytest.fixture(scope="module")
def server(checkpoint):
    with running_server(checkpoint, **LIMITS) as (url, service):
        yield url, service


def raw_request(url: str, head: str, body: bytes = b"") -> bytes:
    """Send `head` (and `body`) on a socket of its own; the answer's first bytes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head.encode() + body)
        return sock.recv(4096)


def test_a_body_declared_too_large_gets_a_413_before_it_is_sent(server):
    url, _ = server
    head = "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
    answer = raw_request(url, head)  # no body follows: the answer cannot wait for it
    assert answer.startswith(b"HTTP/1.1 413") and b"the body is over" in answer


def test_a_chunked_body_gets_a_413_once_past_the_bound_without_its_end(server):
    url, service = server
    head = "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b" " * 60_000
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(50))  # 3 MB, no last chunk
    answer = raw_request(url, head, chunks)  # the body never ends: the answer cannot wait for it
    assert answer.startswith(b"HTTP/1.1 413") and b"the body is over" in answer
    assert 3_000_000 > service.settings.max_texts * service.settings.max_chars * 4 + 65536


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"text": "Un chat. " * 6}, 413, "6 sentences; at most 5"),
        ({"texts": ["un chat.", "un chien. un chat.", "le parc. un homme. une femme."]}, 413, "6 sentences"),
        ({"text": "un chat dort", "split": False, "texts": None}, 200, ""),
        ({"text": "x" * 101}, 413, "at most 100"),
        ({"texts": ["un chat"] * 4}, 413, "at most 3 per request"),
        ({"text": "un chat", "beam_size": 17}, 422, "beam_size"),
        ({"text": "un chat", "beam_size": 16, "n_best": 17}, 422, "n_best"),
        ({"text": "un chat", "beam_size": 3.5}, 422, "beam_size"),
        ({"text": "un \ud800 chat"}, 422, "lone surrogate at character 4"),
    ],
)
def test_bounds_on_sentences_characters_beam_and_n_best(server, body, status, message):
    url, _ = server
    content = json.dumps(body).encode()  # json escapes a lone surrogate as \\ud800, as a client may send it
    response = httpx.post(f"{url}/translate", content=content, headers={"content-type": "application/json"}, timeout=60)
    assert response.status_code == status and message in response.text


def test_a_whole_number_written_as_a_float_is_an_integer(server):
    url, service = server
    answer = httpx.post(f"{url}/translate", json={"text": "un chat", "beam_size": 2.0, "n_best": 2.0}, timeout=60)
    assert answer.status_code == 200 and answer.json()["settings"]["beam_size"] == 2
    assert answer.json()["translations"][0]["text"] == offline(service, ["un chat"], beam_size=2)[0]


@pytest.mark.serial  # timed: the waiting jobs must still wait when the last request arrives
def test_requests_past_the_waiting_bound_get_a_503_with_retry_after(checkpoint, monkeypatch):
    decode, decoding = service_module.decode_batch, threading.Event()

    def slow(translator, sentences, cfg, seed):
        decoding.set()
        time.sleep(0.5)
        return decode(translator, sentences, cfg, seed)

    monkeypatch.setattr(service_module, "decode_batch", slow)

    async def flood(url: str) -> list[httpx.Response]:
        """One request, then (once the worker decodes it) seven more, each with a beam of its own: no batching."""
        async with httpx.AsyncClient(timeout=60) as client:
            bodies = [{"text": f"un chat {i}", "beam_size": 1 + i} for i in range(8)]
            first = asyncio.create_task(client.post(f"{url}/translate", json=bodies[0]))
            assert await asyncio.to_thread(decoding.wait, 30)
            rest = await asyncio.gather(*(client.post(f"{url}/translate", json=body) for body in bodies[1:]))
            return [await first, *rest]

    with running_server(checkpoint, max_waiting=2, max_wait_ms=0.0) as (url, service):
        decoding.clear()  # whatever ran while the server started
        responses = asyncio.run(flood(url))
        busy = [r for r in responses if r.status_code == 503]
        assert busy and all(r.headers["retry-after"] == "1" and "busy" in r.json()["error"] for r in busy)
        assert {r.status_code for r in responses} == {200, 503} and len(responses) - len(busy) >= 3
        assert httpx.get(f"{url}/health").json() == {"status": "ok", "waiting": 0}
        after = httpx.post(f"{url}/translate", json={"text": "un chat"}, timeout=60)
        assert after.json()["translations"][0]["text"] == offline(service, ["un chat"])[0]


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/..%2fapp.py",
        "/static/%2e%2e%2f%2e%2e%2fconfig.py",
        "/static//etc/passwd",
        "/static/%2fetc%2fpasswd",
        "/..%2f..%2fetc/passwd",
    ],
)
def test_no_route_reads_a_path_a_client_names(server, path):
    url, _ = server
    response = httpx.get(url + path)
    assert response.status_code == 404 and "root:" not in response.text and "import" not in response.text


def test_no_request_names_a_file_and_the_server_binds_to_loopback():
    fields = set(TranslateRequest.model_fields) | set(AttentionRequest.model_fields)
    assert not {f for f in fields if any(word in f for word in ("path", "file", "dir", "checkpoint", "output"))}
    assert ServeSettings().host == "127.0.0.1"


@pytest.mark.parametrize("setting", ["temperature", "top_p"])
def test_a_vanishing_sampling_setting_samples_the_greedy_choice(server, setting):
    """Found by schemathesis: temperature=5e-324 made every probability NaN (a failed search); top_p=5e-324
    (0 in float32) dropped every token, the best one too."""
    url, service = server
    body = {"text": "un chien rouge", "sampling": True, setting: 5e-324, "seed": 0}
    answer = httpx.post(f"{url}/translate", json=body, timeout=60)
    assert answer.status_code == 200
    greedy = offline(service, ["un chien rouge"], strategy="greedy")[0]
    assert answer.json()["translations"][0]["text"] == greedy
