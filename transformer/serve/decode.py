"""The one place where the service searches: per-request settings over the server's defaults, one search per batch."""

import dataclasses

from transformer.core.config import DecodingConfig
from transformer.core.strategies import STRATEGIES, control_problems, requested
from transformer.decoding.search_state import Hypothesis, SearchOptions
from transformer.decoding.steered_text import SteeringError
from transformer.decoding.translator import Translator
from transformer.serve.errors import RequestError

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


@dataclasses.dataclass(frozen=True)
class Steered:
    """One sentence of a request, with the target prefix its translation starts with and the constraint phrases it
    must hold."""

    source: str
    prefix: str = ""
    constraints: tuple[str, ...] | None = None


def check_steering(translator: Translator, sentences: list[Steered], cfg: DecodingConfig) -> None:
    """Raise `SteeringError` for controls the strategy of `cfg` does not take, a sentence's wrong constraints, or
    a prefix and constraints beyond its output limit."""
    prefixed, constrained = any(s.prefix for s in sentences), any(s.constraints for s in sentences)
    if found := control_problems(cfg, prefixed, constrained, key="strategy"):
        raise SteeringError("; ".join(found).replace("strategy.", ""))
    if not (prefixed or constrained or cfg.glossary):
        return
    controls, options = translator.with_config(cfg).controls(), SearchOptions.from_config(cfg)
    for sentence in sentences:
        length = len(translator.tokenizer.encode_src([sentence.source], cfg.tag)[0])
        typed = controls.typed(sentence.prefix) if sentence.prefix else None
        phrases = controls.phrases(sentence.source, list(sentence.constraints or ()))
        controls.check_room(length, typed, phrases, options)


def decode_batch(translator: Translator, sentences: list[Steered], cfg: DecodingConfig, seed: int) -> list[Result]:
    """Search `sentences` together with the settings `cfg`, each after its prefix and holding its constraints;
    sampling draws from a generator seeded with `seed`."""
    cfg = dataclasses.replace(cfg, seed=seed, batch_size=max(1, len(sentences)))
    prefixes = [s.prefix for s in sentences] if any(s.prefix for s in sentences) else None
    phrases = [list(s.constraints) for s in sentences] if any(s.constraints for s in sentences) else None
    sources = [s.source for s in sentences]
    return translator.with_config(cfg).search(sources, prefixes=prefixes, constraints=phrases)


def source_tokens(translator: Translator, sentences: list[str], tag: str) -> int:
    """Source tokens (tag and EOS included) of `sentences`; refuses one longer than the model allows (422)."""
    limit = translator.max_positions - 1
    lengths = [len(ids) for ids in translator.tokenizer.encode_src(sentences, tag)]
    for i, n in enumerate(lengths):
        if n > limit:
            raise RequestError(422, f"sentence {i + 1} has {n} tokens, more than the model's {limit}; split it")
    return sum(n + 1 for n in lengths)
