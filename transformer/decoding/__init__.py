"""Decoding: from a model and source ids to hypotheses, and from text to text. The searches (`searching.SEARCHES`,
one per entry of `core.strategies.STRATEGIES`; `beam`, `one_best`, `mbr` over `search_state`, CUDA graphs in
`cuda_graphs`), ensembles, the `Translator` and CTranslate2's engine behind it, chunked and sentence-split
translation, attention heatmaps. It may import `fast_inference`, `models`, `data`, `compute` and `core`.

`from transformer.decoding import search` is the one way into a search (`SearchOptions` its settings); these names
load on first use, so that the console scripts can import `decoding.chunks` or `decoding.sentences` without torch.
"""

_SEARCH = ("search", "greedy_decode", "beam_search", "Hypothesis", "SearchOptions", "penalty_divisor")

__all__ = list(_SEARCH)


def __getattr__(name: str):
    """The search's names, imported (with torch) when first asked for."""
    if name not in _SEARCH:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from transformer.decoding.beam import penalty_divisor
    from transformer.decoding.search_state import Hypothesis, SearchOptions
    from transformer.decoding.searching import beam_search, greedy_decode, search

    found = (search, greedy_decode, beam_search, Hypothesis, SearchOptions, penalty_divisor)
    return dict(zip(_SEARCH, found))[name]
