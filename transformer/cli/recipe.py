"""`transformer-recipe`: the back-translation (bt) or self-training (st) recipe as one resumable command.

See `transformer.recipe` for the stages and `transformer.recipe.run` for how a rerun continues; docs/data.md.
"""

from omegaconf import DictConfig, OmegaConf

from transformer.cli import hydra_app, user_errors
from transformer.core.config import RecipeConfig


@hydra_app("recipe", RecipeConfig)
def main(cfg: DictConfig) -> None:
    from transformer.recipe.plan import settled  # the stages import torch where they read checkpoints
    from transformer.recipe.run import dry_run, run

    with user_errors():
        settings = settled(OmegaConf.to_object(cfg))
        (dry_run if settings.dry_run else run)(settings)


if __name__ == "__main__":
    main()
