"""`transformer-train`: train a model in Hydra's run directory (`hydra.run.dir=PATH`)."""

import logging
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from transformer.cli import hydra_app, user_errors
from transformer.core.config import TrainConfig
from transformer.core.locks import lock_run_dir
from transformer.data.corpus import evaluation_splits
from transformer.runs.run_folder import RunFolder

log = logging.getLogger(__name__)


def before_training(cfg: DictConfig, overrides: list[str]) -> None:
    """Refuse a `trainer.init_from` checkpoint that does not fit the settings (unless the run folder was launched
    before: then it resumes), then lock a run folder named on the command line, both before Hydra writes its config
    and log into it."""
    given = [Path(o.split("=", 1)[1]) for o in overrides if o.startswith("hydra.run.dir=")]
    if cfg.trainer.init_from:
        from transformer.training.start import check_init_from, launched_before  # torch: see transformer.cli

        if not (given and launched_before(given[-1])):
            check_init_from(cfg)
    for run_dir in given:
        lock_run_dir(run_dir)


@hydra_app("train", TrainConfig, before=before_training)
def main(cfg: DictConfig) -> None:
    from transformer.training import Trainer  # torch and datasets: see transformer.cli

    with user_errors():
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        lock_run_dir(run_dir)
        Trainer(cfg, run_dir).fit()
        run = RunFolder(run_dir)
        log.info("checkpoints in %s (%s, %s)", run.checkpoints, run.best.name, run.last.name)
        log.info(
            "evaluate:  transformer-evaluate checkpoint=%s split=%s",
            run_dir,
            (evaluation_splits(cfg.data) or [cfg.data.val_split])[0],
        )
        log.info("translate: echo 'Un chien court dans la neige.' | transformer-translate checkpoint=%s", run_dir)


if __name__ == "__main__":
    main()
