"""`transformer-serve`: load a checkpoint once and serve it over HTTP (docs/serving.md)."""

import logging
import os
import signal
import threading

from omegaconf import DictConfig, OmegaConf

from transformer.cli import hydra_app, user_errors
from transformer.core.config import ServeConfig
from transformer.core.errors import UserError
from transformer.decoding.glossary import load_glossary

log = logging.getLogger(__name__)

# oneDNN keeps up to 1,024 kernels, one per product shape, and a server's batches keep coming in new shapes: an hour
# of steady load held 55 MiB (+9.7%) more than its first 5 minutes; with 8 kept, 486 -> 502 MiB in 10 minutes at the
# same throughput (docs/serving.md#an-hour-of-steady-load). Read at oneDNN's first kernel; the environment wins.
ONEDNN_KERNELS_KEPT = "8"


@hydra_app("serve", ServeConfig)
def main(cfg: DictConfig) -> None:
    import torch  # torch and what needs it: see transformer.cli

    from transformer.runs.loading import load

    with user_errors():
        try:
            import uvicorn

            from transformer.serve.app import create_app
            from transformer.serve.service import Service
        except ImportError as err:
            raise UserError(f"transformer-serve needs the serve extra: pip install -e '.[serve]' ({err})") from err
        if cfg.decoding.glossary:
            load_glossary(cfg.decoding.glossary)  # its mistakes before the model loads
        os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", ONEDNN_KERNELS_KEPT)
        settings = OmegaConf.to_object(cfg.serve)
        if settings.num_threads > 0:
            torch.set_num_threads(settings.num_threads)
        loaded, alignment = load(cfg.checkpoint, device=cfg.device), OmegaConf.to_object(cfg.alignment)
        service = Service(loaded, OmegaConf.to_object(cfg.decoding), settings, alignment)
        log.info(
            "serving %s on http://%s:%d (the page at /, the API at /docs)", service.name, settings.host, settings.port
        )
        app = create_app(service, decoding_threads=False)
        server = uvicorn.Server(uvicorn.Config(app, settings.host, settings.port, log_config=None, access_log=False))
        serve(server, service.batcher)
        if not server.started:
            raise UserError(f"could not serve on {settings.host}:{settings.port} (the reason is logged above)")


def serve(server, batcher) -> None:
    """HTTP in a thread, searches in this (main) thread, where torch's parallel regions start fastest, until
    SIGINT/SIGTERM (a second one stops at once) or the server ends."""

    def http() -> None:
        try:
            server.run()
        finally:
            batcher.stop()  # also when the server could not start

    def on_signal(signum, frame) -> None:
        server.force_exit = server.should_exit
        server.should_exit = True

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    thread = threading.Thread(target=http, name="http")
    thread.start()
    batcher.run()
    thread.join()


if __name__ == "__main__":
    main()
