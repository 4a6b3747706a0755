"""The one place where the service searches: per-request settings over the server's defaults, one search per batch."""

import dataclasses

from transformer.config import DecodingConfig
from transformer.search_state import Hypothesis
from transformer.translator import Translator

Result = tuple[list[int], list[Hypothesis]]  # source ids, hypotheses best first


def decoding_settings(defaults: DecodingConfig, **request) -> DecodingConfig:
    """The server's defaults overridden by a request's `beam_size`, `n_best`, `length_penalty`, `sampling`, ...

    A `beam_size` or an `n_best` > 1 asks for beam search, `sampling=true` for sampling.
    """
    given = {k: v for k, v in request.items() if v is not None}
    sampling = given.pop("sampling", defaults.strategy == "sample")
    strategy = defaults.strategy
    if sampling:
        strategy = "sample"
    elif strategy == "sample" or "beam_size" in given or given.get("n_best", 1) > 1:
        strategy = "beam"
    cfg = dataclasses.replace(defaults, strategy=strategy, **given)
    if cfg.strategy != "beam":
        cfg = dataclasses.replace(cfg, n_best=1)
    return cfg


def decode_batch(translator: Translator, sentences: list[str], cfg: DecodingConfig, seed: int) -> list[Result]:
    """Search `sentences` together with the settings `cfg`; sampling draws from a generator seeded with `seed`."""
    cfg = dataclasses.replace(cfg, seed=seed, batch_size=max(1, len(sentences)))
    return translator.with_config(cfg).search(sentences)
