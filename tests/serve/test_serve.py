"""transformer-serve on a real uvicorn server on loopback: answers, settings, attention, bad input, faults."""

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="transformer-serve needs the serve extra: pip install -e '.[dev,serve]'")
import httpx  # noqa: E402

from tests.serve.serving import offline, running_server, write_checkpoint  # noqa: E402
from transformer.decoding.translator import Translator  # noqa: E402
from transformer.serve import service as service_module  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return write_checkpoint(tmp_path_factory.mktemp("serve") / "tiny.safetensors")


@pytest.fixture(scope="module")
def server(checkpoint):
    with running_server(checkpoint, max_wait_ms=50.0, max_chars=200, max_texts=4) as (url, service):
        yield url, service


def test_a_text_is_split_translated_like_offline_and_joined_with_its_line_breaks(server):
    url, service = server
    text = "un chien rouge. le chat dort dans le parc.\n\nun homme court!"
    answer = httpx.post(f"{url}/translate", json={"text": text}, timeout=60).json()
    sentences = ["un chien rouge.", "le chat dort dans le parc.", "un homme court!"]
    expected = offline(service, sentences)
    result = answer["translations"][0]
    assert [s["source"] for s in result["sentences"]] == sentences
    assert [s["translation"] for s in result["sentences"]] == expected
    assert result["text"] == f"{expected[0]} {expected[1]}\n\n{expected[2]}"
    assert answer["model"] == "tiny.safetensors" and answer["settings"]["strategy"] == "beam"
    assert answer["batch"]["sentences"] >= 3 and answer["timings"]["total_ms"] > 0


def test_request_settings_override_the_defaults(server):
    url, service = server
    post = lambda **body: httpx.post(f"{url}/translate", json={"text": "le chat mange.", **body}, timeout=60).json()  # noqa: E731
    nbest = post(n_best=3, beam_size=3, length_penalty=0.5)["translations"][0]["sentences"][0]["n_best"]
    assert len(nbest) == 3 and [h["score"] for h in nbest] == sorted((h["score"] for h in nbest), reverse=True)
    assert nbest[0]["text"] == offline(service, ["le chat mange."], beam_size=3, length_penalty=0.5)[0]
    first, again, other = (post(sampling=True, seed=s, temperature=2.0) for s in (5, 5, 6))
    assert first["settings"]["strategy"] == "sample" and first["settings"]["seed"] == 5
    assert first["translations"] == again["translations"]  # the request's own generator, seeded
    assert other["settings"]["seed"] == 6 and other["translations"][0]["text"]


def test_a_prefix_alternatives_and_suppressed_phrases_steer_a_request_as_offline(server):
    url, service = server
    post = lambda **body: httpx.post(f"{url}/translate", json={"text": "le chat mange.", **body}, timeout=60).json()  # noqa: E731
    steered = post(target_prefix="a cat ea")["translations"][0]
    expected = Translator(service.model, service.tokenizer, service.defaults).translate(
        ["le chat mange."], prefixes=["a cat ea"]
    )
    assert steered["text"] == expected[0] and expected[0].startswith("a cat ea")
    answer = post(target_prefix="a ", alternatives=3, strategy="greedy")
    alternatives = answer["translations"][0]["sentences"][0]["n_best"]
    assert answer["settings"]["alternatives"] == 3 and len(alternatives) == 3
    assert len({a["text"] for a in alternatives}) == 3 and all(a["text"].startswith("a ") for a in alternatives)
    constrained = post(constraints=["dog", "a man"])["translations"][0]
    assert (
        constrained["text"]
        == Translator(service.model, service.tokenizer, service.defaults).translate(
            ["le chat mange."], constraints=[["dog", "a man"]]
        )[0]
    )
    assert "dog" in constrained["text"].split() and "a man" in constrained["text"]
    free = post(strategy="greedy")["translations"][0]["text"].split()
    answer = post(strategy="greedy", suppress=free[:1], ban_unk=True)
    assert answer["settings"]["suppress"] == free[:1] and answer["translations"][0]["text"].split()[:1] != free[:1]


def test_health_info_metrics_and_the_page(server):
    url, _ = server
    assert httpx.get(f"{url}/health").json()["status"] == "ok"
    info = httpx.get(f"{url}/info").json()
    assert info["vocabulary"]["source"] == 60 and info["decoding"]["beam_size"] == 3 and info["step"] == "7"
    httpx.post(f"{url}/translate", json={"text": ""})
    metrics = httpx.get(f"{url}/metrics").text
    assert 'serve_requests_total{path="/translate",status="422"}' in metrics
    assert "serve_request_seconds_bucket" in metrics and "serve_batch_sentences_count" in metrics
    page = httpx.get(f"{url}/")
    assert page.status_code == 200 and "/static/page.js" in page.text
    assert "fetch(" in httpx.get(f"{url}/static/page.js").text and httpx.get(f"{url}/openapi.json").status_code == 200


def test_attention_is_target_by_source_and_each_row_sums_to_one(server):
    url, service = server
    answer = httpx.post(f"{url}/attention", json={"text": "un chien rouge", "layer": -1}, timeout=60).json()
    weights, src, tgt = answer["weights"], answer["source_tokens"], answer["target_tokens"]
    assert answer["translation"] == offline(service, ["un chien rouge"])[0]
    assert src[-1] == tgt[-1] == "</s>" and len(weights) == len(tgt) and all(len(row) == len(src) for row in weights)
    assert all(abs(sum(row) - 1) < 0.01 for row in weights)
    bad = httpx.post(f"{url}/attention", json={"text": "un chien", "layer": 2})
    assert bad.status_code == 422 and "2 decoder layers" in bad.json()["error"]


def test_an_rnn_checkpoint_is_served_with_no_extra_setting(tmp_path):
    checkpoint = write_checkpoint(tmp_path / "rnn.safetensors", family="rnn")
    with running_server(checkpoint, max_wait_ms=5.0) as (url, service):
        answer = httpx.post(f"{url}/translate", json={"text": "un chien rouge. le chat dort."}, timeout=60).json()
        sentences = answer["translations"][0]["sentences"]
        assert [s["translation"] for s in sentences] == offline(service, ["un chien rouge.", "le chat dort."])
        attention = httpx.post(f"{url}/attention", json={"text": "un chat", "layer": 0}, timeout=60).json()
        assert len(attention["weights"]) == len(attention["target_tokens"])
        assert all(abs(sum(row) - 1) < 0.01 for row in attention["weights"])
        bad = httpx.post(f"{url}/attention", json={"text": "un chat", "layer": 1})
        assert bad.status_code == 422 and "1 decoder layers" in bad.json()["error"]


BAD_BODIES = [
    (b'{"text": ', 400, "not valid JSON"),
    (b'{"text": "\xff\xfe un chien"}', 400, "UTF-8"),
    (b'{"text": 5}', 422, "text"),
    (b'["un chien"]', 422, "body"),
    (b'{"text": "  \\n "}', 422, "empty"),
    (b'{"texts": []}', 422, "empty"),
    (b'{"text": "a", "texts": ["b"]}', 422, "either text or texts"),
    (b'{"texts": ["a", "b", "c", "d", "e"]}', 413, "at most 4"),
    (json.dumps({"text": "chat " * 50}).encode(), 413, "at most 200"),
    (b'{"text": "un chien", "beam": 3}', 422, "beam: Extra inputs"),
    (b'{"text": "un chien", "beam_size": "3"}', 422, "beam_size"),
    (b'{"text": "un chien", "beam_size": 0}', 422, "beam_size"),
    (b'{"text": "un chien", "n_best": 4}', 422, "n_best=4 must be at most beam_size=3"),
    (b'{"text": "un chien", "sampling": "yes"}', 422, "sampling"),
    (json.dumps({"text": " ".join(["chien"] * 15)}).encode(), 422, "more than the model's"),
    (b'{"texts": ["un chien"], "target_prefix": "a"}', 422, "target_prefix and constraints go with text"),
    (b'{"text": "un chien", "constraints": ["dog", "dog"]}', 422, "given twice"),
    (b'{"text": "un chien", "constraints": ["dog"], "strategy": "greedy"}', 422, "strategy=beam"),
    (b'{"text": "un chien", "constraints": ["dog", "cat", "red"]}', 422, "beam_size=4 or more"),
    (b'{"text": "un chien", "constraints": ["dog"], "suppress": ["dog"]}', 422, "suppressed"),
    (b'{"text": "un chien", "constraints": ["a b c d e f g h i j"]}', 422, "output limit"),
    (json.dumps({"text": "un chien", "constraints": ["x"] * 9}).encode(), 422, "constraints"),
    (json.dumps({"text": "un chien", "target_prefix": "a b c d e f g h i j k"}).encode(), 422, "output limit"),
    (b'{"text": "un chien", "target_prefix": "a", "sampling": true, "alternatives": 2}', 422, "strategy=greedy or"),
    (b'{"text": "un chien", "alternatives": 2, "n_best": 2}', 422, "leave n_best at 1"),
    (b'{"text": "un chien", "alternatives": 17}', 422, "alternatives"),
    (b'{"text": "un chien", "suppress": [""]}', 422, "suppress"),
    (json.dumps({"text": "un chien", "suppress": ["x"] * 33}).encode(), 422, "suppress"),
]


@pytest.mark.parametrize("body, status, message", BAD_BODIES)
def test_bad_input_gets_a_json_4xx_and_the_next_request_is_answered(server, body, status, message):
    url, _ = server
    response = httpx.post(f"{url}/translate", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status and message in response.json()["error"]
    assert httpx.post(f"{url}/translate", json={"text": "un chat"}, timeout=60).status_code == 200


def test_concurrent_requests_with_equal_settings_share_a_batch_and_others_do_not(server):
    url, service = server

    async def run() -> list[dict]:
        async with httpx.AsyncClient(timeout=60) as client:
            words = ["rouge", "bleu", "dort", "court", "mange", "dans le parc", "le chat", "la femme"]
            bodies = [{"text": f"un chien {w}", "beam_size": 2 + i % 2} for i, w in enumerate(words)]
            responses = await asyncio.gather(*(client.post(f"{url}/translate", json=b) for b in bodies))
            return [(b, r.json()) for b, r in zip(bodies, responses)]

    answers = asyncio.run(run())
    for body, answer in answers:  # each sentence as translated alone, in the default precision (int8 where it runs)
        assert answer["translations"][0]["text"] == offline(service, [body["text"]], beam_size=body["beam_size"])[0]
    batches = {}
    for body, answer in answers:
        batches.setdefault(answer["batch"]["id"], set()).add(body["beam_size"])
    assert all(len(sizes) == 1 for sizes in batches.values())  # never two settings in one search
    assert max(answer["batch"]["requests"] for _, answer in answers) > 1


@pytest.mark.serial  # times the answer: run alone
def test_a_slow_request_gets_a_503_and_the_server_keeps_serving(checkpoint, monkeypatch):
    decode = service_module.decode_batch

    def slow_for_some(translator, sentences, cfg, seed):
        if any("lent" in s.source for s in sentences):
            time.sleep(3)
        return decode(translator, sentences, cfg, seed)

    monkeypatch.setattr(service_module, "decode_batch", slow_for_some)
    with running_server(checkpoint, timeout_s=1.0, workers=2, max_wait_ms=0.0) as (url, service):
        start = time.monotonic()
        slow = httpx.post(f"{url}/translate", json={"text": "un chien lent"}, timeout=30)
        assert slow.status_code == 503 and "not translated within 1.0 s" in slow.json()["error"]
        assert slow.headers["retry-after"] == "1"
        assert time.monotonic() - start < 2.5
        good = httpx.post(f"{url}/translate", json={"text": "un chat"}, timeout=30)
        assert good.status_code == 200 and good.json()["translations"][0]["text"] == offline(service, ["un chat"])[0]


def test_a_client_that_disconnects_mid_request_harms_nobody(server):
    url, service = server
    host, port = url.removeprefix("http://").split(":")

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as client:
            calls = [client.post(f"{url}/translate", json={"text": f"le chat {w}"}) for w in ("dort", "mange")]
            return await asyncio.gather(*calls, asyncio.to_thread(disconnect))

    def disconnect() -> None:
        body = json.dumps({"texts": ["un homme court dans le parc."] * 4}).encode()
        with socket.create_connection((host, int(port))) as sock:
            head = f"POST /translate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(0.02)  # gone before the answer

    first, second, _ = asyncio.run(run())
    assert first.status_code == second.status_code == 200
    assert second.json()["translations"][0]["text"] == offline(service, ["le chat mange"])[0]
    deadline = time.monotonic() + 10  # the gone client's job may still be queued; it is decoded and dropped
    while (health := httpx.get(f"{url}/health").json())["waiting"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert health == {"status": "ok", "waiting": 0}


@pytest.mark.slow
def test_the_console_script_serves_and_rejects_a_bad_setting(checkpoint, tmp_path):
    script = Path(sys.executable).parent / "transformer-serve"
    bad = subprocess.run(
        [str(script), f"checkpoint={checkpoint}", "serve.max_batch_tokens=0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "serve.max_batch_tokens=0 must be at least 1" in bad.stderr
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args = [str(script), f"checkpoint={checkpoint}", f"serve.port={port}", "serve.num_threads=1", "decoding=greedy"]
    process = subprocess.Popen(args, stderr=open(tmp_path / "log", "w"), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                answer = httpx.post(f"http://127.0.0.1:{port}/translate", json={"text": "un chat"}, timeout=30)
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "log").read_text()
                time.sleep(0.2)
        assert answer.status_code == 200 and answer.json()["settings"]["strategy"] == "greedy"
        taken = subprocess.run(args, capture_output=True, text=True, timeout=120)  # the same port again
        assert taken.returncode == 2 and f"could not serve on 127.0.0.1:{port}" in taken.stderr
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert process.returncode == 0  # SIGTERM: a clean shutdown
    log = (tmp_path / "log").read_text()
    assert "POST /translate 200 7 chars, 1 sentences, batch 1 (1 requests, 1 sentences)" in log


def test_score_gives_the_translator_s_scores_with_tokens_and_alignments(server):
    url, service = server
    pairs = [{"source": "un chien rouge", "target": "a red dog"}, {"source": "le chat", "target": "the cat"}]
    body = {"pairs": pairs, "tokens": True, "alignments": True, "length_penalty": 0.5}
    answer = httpx.post(f"{url}/score", json=body, timeout=60).json()
    cfg = service.defaults.__class__(**{**service.defaults.__dict__, "length_penalty": 0.5})
    expected = Translator(service.model, service.tokenizer, cfg).score(
        [p["source"] for p in pairs], [p["target"] for p in pairs]
    )
    for got, want, pair in zip(answer["scores"], expected, pairs, strict=True):
        assert (got["score"], got["logprob"]) == pytest.approx((want.score, want.logprob), abs=1e-4)
        assert got["tokens"] == pytest.approx(want.token_scores, abs=1e-4)
        links = [tuple(map(int, link.split("-"))) for link in got["alignment"].split()]
        assert {j for _, j in links} == set(range(len(pair["target"].split())))
    refused = httpx.post(f"{url}/score", json={"pairs": [pairs[0], {"source": "le chat", "target": " "}]}, timeout=60)
    assert refused.status_code == 422 and "pair 2: the target is empty" in refused.json()["error"]
    too_many = httpx.post(f"{url}/score", json={"pairs": pairs * 3}, timeout=60)
    assert too_many.status_code == 413


def test_translate_gives_alignments_and_carries_markup(server):
    url, _ = server
    text = 'un <b>chien</b> rouge {n}\nle <i>chat <a href="#">noir</a></i>'
    answer = httpx.post(f"{url}/translate", json={"text": text, "markup": "xml", "alignments": True}, timeout=60)
    result = answer.json()["translations"][0]
    lines = result["text"].split("\n")
    assert len(lines) == 2 and [s["source"] for s in result["sentences"]] == ["un chien rouge", "le chat noir"]
    for line, tags in zip(lines, (["<b>", "</b>", "{n}"], ["<i>", '<a href="#">', "</a>", "</i>"])):
        assert all(line.count(tag) == 1 for tag in tags), line
        assert all("-" in link for link in result["sentences"][0]["alignment"].split())
    bad = httpx.post(f"{url}/translate", json={"text": "un <b>chien", "markup": "xml"}, timeout=60)
    assert bad.status_code == 422 and "text 1, line 1: <b> is never closed" in bad.json()["error"]
