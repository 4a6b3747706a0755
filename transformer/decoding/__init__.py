"""Decoding: the strategies' table (`STRATEGIES`, torch-free) and `search`, the one way into a search.

`strategies` holds what the config, its checks, `--help` and the service read, and imports no torch; the search
(`searching`, `one_best`, `transformer.beam`) does, so its names load on first use: `from transformer.decoding
import search` imports torch, `from transformer.decoding import STRATEGIES` does not.
"""

from importlib import import_module

from transformer.decoding.strategies import STRATEGIES, Option, Strategy

_SEARCH = {
    "search": "transformer.decoding.searching",
    "greedy_decode": "transformer.decoding.searching",
    "beam_search": "transformer.decoding.searching",
    "Hypothesis": "transformer.search_state",
    "SearchOptions": "transformer.search_state",
    "penalty_divisor": "transformer.beam",
}

__all__ = ["STRATEGIES", "Option", "Strategy", *_SEARCH]


def __getattr__(name: str):
    """The search's names, imported (with torch) when first asked for."""
    if name not in _SEARCH:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_SEARCH[name]), name)
