"""`transformer-prepare`: fetch a corpus, train SentencePiece, tokenize and cache every split."""

import hydra
from omegaconf import DictConfig

from transformer.cli import CONFIG_PATH, user_errors
from transformer.config import check_config
from transformer.data import prepare


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="prepare")
def main(cfg: DictConfig) -> None:
    with user_errors():
        check_config(cfg)
        prepared = prepare(cfg.data)
        print(prepared.dir)


if __name__ == "__main__":
    main()
