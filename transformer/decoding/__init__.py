"""Decoding: the strategies' table (`STRATEGIES`, torch-free) and `search`, the one way into a search.

`strategies` holds what the config, its checks, `--help` and the service read, and imports no torch; the search
(`searching`, `one_best`, `mbr`, `transformer.beam`) does, so its names load on first use: `from transformer.decoding
import search` imports torch, `from transformer.decoding import STRATEGIES` does not.
"""

from transformer.decoding.strategies import STRATEGIES, Option, Strategy

_SEARCH = ("search", "greedy_decode", "beam_search", "Hypothesis", "SearchOptions", "penalty_divisor")

__all__ = ["STRATEGIES", "Option", "Strategy", *_SEARCH]


def __getattr__(name: str):
    """The search's names, imported (with torch) when first asked for."""
    if name not in _SEARCH:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from transformer.beam import penalty_divisor
    from transformer.decoding.searching import beam_search, greedy_decode, search
    from transformer.search_state import Hypothesis, SearchOptions

    found = (search, greedy_decode, beam_search, Hypothesis, SearchOptions, penalty_divisor)
    return dict(zip(_SEARCH, found))[name]
