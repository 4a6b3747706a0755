"""`transformer-prepare`: fetch a corpus, train SentencePiece, tokenize and cache every split."""

from omegaconf import DictConfig

from transformer.cli import hydra_app, user_errors
from transformer.core.config import PrepareConfig


@hydra_app("prepare", PrepareConfig)
def main(cfg: DictConfig) -> None:
    from transformer.data.preparation import prepare  # pyarrow, SentencePiece: see transformer.cli

    with user_errors():
        prepared = prepare(cfg.data)
        print(prepared.dir)


if __name__ == "__main__":
    main()
