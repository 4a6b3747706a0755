"""Helpers of the serve tests: a tiny checkpoint on disk and a real uvicorn server on loopback."""

import contextlib
import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import torch

from transformer.bench.tiny import write_checkpoint  # noqa: F401 (the tests import it from here)
from transformer.core.config import DecodingConfig, ServeSettings
from transformer.core.precision import TRANSLATED_IN
from transformer.decoding.translator import Translator
from transformer.runs.loading import load

DEFAULTS = DecodingConfig(strategy="beam", beam_size=3, max_len_b=6, precision=TRANSLATED_IN)  # as a user's


def offline(service, sentences: list[str], **settings) -> list[str]:
    """What `transformer-translate` gives for `sentences` with the service's defaults overridden by `settings`."""
    cfg = dataclasses.replace(service.defaults, **settings)
    return Translator(service.model, service.tokenizer, cfg).translate(sentences)


def offline_ids(service, sentence: str, **settings) -> list[int]:
    """The best hypothesis' token ids for `sentence`, searched offline as `offline` does."""
    cfg = dataclasses.replace(service.defaults, **settings)
    return Translator(service.model, service.tokenizer, cfg).search([sentence])[0][1][0].tokens


@contextlib.contextmanager
def running_server(checkpoint: Path, defaults: DecodingConfig = DEFAULTS, **settings) -> Iterator[tuple[str, object]]:
    """A uvicorn server in a thread on a free loopback port: yields its URL and its `Service`."""
    import uvicorn

    from transformer.serve.app import create_app
    from transformer.serve.service import Service

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    service = Service(load(str(checkpoint), device="cpu"), defaults, ServeSettings(port=port, **settings))
    config = uvicorn.Config(create_app(service), log_config=None, access_log=False, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as `serve.num_threads=1`: on a shared, busy machine far faster for a tiny model
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", service
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        torch.set_num_threads(threads)
