"""`transformer-train`: train a model in Hydra's run directory (`hydra.run.dir=PATH`)."""

import logging
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from transformer.cli import hydra_app, user_errors
from transformer.config import TrainConfig, check_config
from transformer.corpus import evaluation_splits
from transformer.training import Trainer

log = logging.getLogger(__name__)


@hydra_app("train", TrainConfig)
def main(cfg: DictConfig) -> None:
    with user_errors():
        check_config(cfg)
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        Trainer(cfg, run_dir).fit()
        log.info("checkpoints in %s/checkpoints (best.safetensors, last.safetensors)", run_dir)
        log.info(
            "evaluate:  transformer-evaluate checkpoint=%s split=%s",
            run_dir,
            (evaluation_splits(cfg.data) or [cfg.data.val_split])[0],
        )
        log.info("translate: echo 'Un chien court dans la neige.' | transformer-translate checkpoint=%s", run_dir)


if __name__ == "__main__":
    main()
