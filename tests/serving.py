"""Helpers of the serve tests: a tiny checkpoint on disk and a real uvicorn server on loopback."""

import contextlib
import dataclasses
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from omegaconf import OmegaConf

from tests.conftest import WORDS_EN, WORDS_FR
from transformer.checkpoint import save_checkpoint
from transformer.config import DecodingConfig, ModelConfig, RNNConfig, ServeSettings, TokenizerConfig
from transformer.factory import build_model
from transformer.loading import load
from transformer.tokenizer import Tokenizer, train_sentencepiece
from transformer.translator import Translator

DEFAULTS = DecodingConfig(strategy="beam", beam_size=3, max_len_b=6)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
# Without the background-networking flags Chromium tries to reach the internet, which a closed network refuses.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DRAWN = "document.getElementById('heatmap').dataset.title"


def offline(service, sentences: list[str], **settings) -> list[str]:
    """What `transformer-translate` gives for `sentences` with the service's defaults overridden by `settings`."""
    cfg = dataclasses.replace(service.defaults, **settings)
    return Translator(service.model, service.tokenizer, cfg).translate(sentences)


def offline_ids(service, sentence: str, **settings) -> list[int]:
    """The best hypothesis' token ids for `sentence`, searched offline as `offline` does."""
    cfg = dataclasses.replace(service.defaults, **settings)
    return Translator(service.model, service.tokenizer, cfg).search([sentence])[0][1][0].tokens


def write_checkpoint(
    path: Path, family: str = "transformer", seed: int = 0, d_model: int = 32, tags: tuple[str, ...] = (), **meta
) -> Path:
    """A random tiny model (a Transformer, or Bahdanau's RNN) with a joint SentencePiece vocabulary of the test
    words (and corpus `tags`): fast, deterministic; `meta` (default step=7) goes into the file."""
    sentences = [" ".join(WORDS_FR[i:] + WORDS_EN[:i]) for i in range(len(WORDS_FR))] * 5
    proto = train_sentencepiece(iter(sentences), TokenizerConfig(vocab_size=60), tags)
    tokenizer = Tokenizer(proto, proto)
    rnn = RNNConfig(embedding_dim=16, encoder_hidden=16, decoder_hidden=32, attention_dim=16)
    cfg = ModelConfig(
        family=family,
        d_model=d_model,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        max_positions=64,
        rnn=rnn,
    )
    torch.manual_seed(seed)
    model = build_model(cfg, tokenizer).eval()
    save_checkpoint(
        path, model, tokenizer, OmegaConf.create({"model": dataclasses.asdict(cfg)}), **(meta or {"step": 7})
    )
    return path


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
