"""`transformer-serve`: load a checkpoint once and serve it over HTTP (docs/serving.md)."""

import logging

import torch
from omegaconf import DictConfig, OmegaConf

from transformer.checkpoint import load_checkpoint
from transformer.cli import hydra_app, user_errors
from transformer.config import ServeConfig
from transformer.config_checks import check_config
from transformer.errors import UserError
from transformer.runtime import pick_device

log = logging.getLogger(__name__)


@hydra_app("serve", ServeConfig)
def main(cfg: DictConfig) -> None:
    with user_errors():
        check_config(cfg)
        try:
            import uvicorn

            from transformer.serve.app import create_app
            from transformer.serve.service import Service
        except ImportError as err:
            raise UserError(f"transformer-serve needs the serve extra: pip install -e '.[serve]' ({err})") from err
        settings = OmegaConf.to_object(cfg.serve)
        if settings.num_threads > 0:
            torch.set_num_threads(settings.num_threads)
        ckpt = load_checkpoint(cfg.checkpoint, pick_device(cfg.device))
        service = Service(ckpt, OmegaConf.to_object(cfg.decoding), settings)
        log.info(
            "serving %s on http://%s:%d (the page at /, the API at /docs)", service.name, settings.host, settings.port
        )
        uvicorn.run(create_app(service), host=settings.host, port=settings.port, log_config=None, access_log=False)


if __name__ == "__main__":
    main()
