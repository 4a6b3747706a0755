"""The one place where the service searches: per-request settings over the server's defaults, one search per batch."""

import dataclasses

from transformer.core.config import DecodingConfig
from transformer.core.strategies import STRATEGIES, requested
from transformer.decoding.search_state import Hypothesis
from transformer.decoding.translator import Translator

Result = tuple[list[int], list[Hypothesis]]  # source ids, hypotheses best first


def decoding_settings(defaults: DecodingConfig, **request) -> DecodingConfig:
    """The server's defaults overridden by a request's `strategy`, `beam_size`, `n_best`, `sampling`, ...

    The strategy is the one the request asks for (`strategies.requested`); one that gives a single hypothesis
    gets n_best=1.
    """
    given = {k: v for k, v in request.items() if v is not None}
    strategy = requested(defaults.strategy, given)
    settings = {k: v for k, v in given.items() if k != "strategy" and k not in (e.flag for e in STRATEGIES.values())}
    cfg = dataclasses.replace(defaults, strategy=strategy, **settings)
    if "n_best" not in STRATEGIES[strategy].reads():
        cfg = dataclasses.replace(cfg, n_best=1)
    return cfg


def decode_batch(
    translator: Translator,
    sentences: list[str],
    cfg: DecodingConfig,
    seed: int,
    prefixes: list[str] | None = None,
    constraints: list[list[str]] | None = None,
) -> list[Result]:
    """Search `sentences` together with the settings `cfg`, each after its prefix in `prefixes` and holding its
    `constraints`; sampling draws from a generator seeded with `seed`."""
    cfg = dataclasses.replace(cfg, seed=seed, batch_size=max(1, len(sentences)))
    return translator.with_config(cfg).search(sentences, prefixes=prefixes, constraints=constraints)
