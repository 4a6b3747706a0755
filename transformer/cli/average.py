"""`transformer-average`: average the weights of several checkpoints of a run into one checkpoint."""

from pathlib import Path

from omegaconf import DictConfig

from transformer.cli import hydra_app, user_errors
from transformer.core.config import AverageConfig
from transformer.core.errors import UserError
from transformer.runs.run_folder import RunFolder


def output_path(cfg: DictConfig) -> Path:
    """`output`, else the first run folder's `RunFolder.average` (checkpoints/avg_last{N}.safetensors, ...)."""
    if cfg.output:
        return Path(cfg.output)
    run_dir = next((Path(p) for p in cfg.checkpoints if Path(p).is_dir()), None)
    if run_dir is None:
        raise UserError("give output=FILE.safetensors (the default lies in the first run folder; none was given)")
    return RunFolder(run_dir).average(cfg.last, cfg.best)


@hydra_app("average", AverageConfig)
def main(cfg: DictConfig) -> None:
    from transformer.runs.averaging import average, candidates, select  # torch: see transformer.cli

    with user_errors():
        files = select(candidates(list(cfg.checkpoints)), cfg.last, cfg.best)
        output = output_path(cfg)
        if output.is_dir():
            raise UserError(f"output={output} is a folder; give the averaged checkpoint's file name")
        steps = average(files, output)
        print(f"averaged {len(files)} checkpoints (steps {steps}) -> {output}")


if __name__ == "__main__":
    main()
