"""`search`, the one way into decoding, its keyword shorthands `greedy_decode` and `beam_search`, and `SEARCHES`.

`search(model, src, options)` runs the search that `SEARCHES` names for `options.strategy` (an entry of
`core.strategies.STRATEGIES`, which holds its settings) over any model with `encode`, `init_cache` and `decode`; every
strategy returns, per sentence, a list of `Hypothesis` (best first). All strategies share one step
(`SearchState.step`); with `use_cache=True` a step feeds only the newest token and reads the rest of the prefix from a
`DecoderCache`, with `use_cache=False` it re-runs the whole prefix. The two give the same ids. Lengths count generated
tokens including EOS; BOS and pad are never generated. The search runs on the model it is given: whoever loads a model
for inference passes its `inference_copy` (`transformer.fast_inference`), made once.
"""

from collections.abc import Callable

import torch
from torch import Tensor, nn

from transformer.core.config import DecodingConfig
from transformer.decoding.alternatives import alternatives
from transformer.decoding.beam import beam
from transformer.decoding.constrained import constrained_beam
from transformer.decoding.mbr import mbr
from transformer.decoding.one_best import greedy, greedy_ids, sample
from transformer.decoding.search_state import Hypothesis, SearchOptions, Text, limits
from transformer.decoding.steering import Controls, forced_lengths
from transformer.models.interface import Seq2SeqModel

# (model, src (B, S), options, per-sentence output limits (B,), generator, text, controls) -> hypotheses, best first
Search = Callable[
    [Seq2SeqModel, Tensor, SearchOptions, Tensor, torch.Generator | None, Text | None, Controls | None], list
]

# The search of each entry of `core.strategies.STRATEGIES`, by the same name; a static-shape variant for the GPU is
# chosen inside it (`decoding.cuda_graphs.applies`).
SEARCHES: dict[str, Search] = {
    "greedy": lambda model, src, options, limit, generator, text, controls: greedy(
        model, src, options, limit, controls
    ),
    "beam": lambda model, src, options, limit, generator, text, controls: (
        constrained_beam if controls is not None and controls.constraints else beam
    )(model, src, options, limit, controls),
    "sample": lambda model, src, options, limit, generator, text, controls: sample(
        model, src, options, limit, generator, controls
    ),
    "mbr": mbr,
}


def _prepared(model: Seq2SeqModel, src: Tensor, options: SearchOptions, max_len: int | Tensor | None) -> Tensor:
    """Put `model` in eval mode; the per-sentence output limits (B,): `max_len`, else `options.output_limits` of the
    source lengths."""
    if not isinstance(model, nn.Module) or any(m.training for m in model.modules()):
        model.eval()  # which sets every module's flag again: ~8% of a compiled beam search at batch 1
    if max_len is None:
        return options.output_limits((src != model.pad_id).sum(1), model.max_positions)
    return limits(max_len, src.size(0), src.device)


@torch.inference_mode()
def search(
    model: Seq2SeqModel,
    src: Tensor,
    options: SearchOptions,
    generator: torch.Generator | None = None,
    max_len: int | Tensor | None = None,
    text: Text | None = None,
    controls: Controls | None = None,
) -> list[list[Hypothesis]]:
    """Hypotheses (best first; at most `options.n_best`) for each source row of `src` (B, S).

    Output limits are `options.output_limits` of the source lengths unless `max_len` (an int or a (B,) tensor) is
    given; they count a prefix's tokens. `generator` (on `src`'s device) drives sampling; `text` turns target ids
    into text for a strategy that compares translations; `controls` steer each sentence (`decoding.steering`).
    """
    limit = _prepared(model, src, options, max_len)
    room = 1 + bool(controls is not None and controls.alternatives)  # a token after the prefix, and its first piece
    too_long = [i for i, n in enumerate(forced_lengths(controls, src.size(0))) if n + room > int(limit[i])]
    if too_long:
        raise ValueError(f"the prefixes of rows {too_long} leave no room under their output limits")
    strategy = SEARCHES[options.strategy]
    if controls is not None and controls.alternatives:
        return alternatives(strategy, model, src, options, limit, generator, text, controls)
    return strategy(model, src, options, limit, generator, text, controls)


@torch.inference_mode()
def greedy_decode(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    bos_id: int,
    eos_id: int,
    max_len: int | Tensor,
    use_cache: bool = True,
    cuda_graphs: bool = True,
) -> Tensor:
    """`search`'s greedy ids as one tensor (B, ≤max_len): without BOS, EOS included where generated, pad_id after.

    `max_len` may be a (B,) tensor of per-sentence limits; `cuda_graphs=False` keeps a GPU search eager.
    """
    options = SearchOptions.from_config(
        strategy="greedy", bos_id=bos_id, eos_id=eos_id, use_cache=use_cache, cuda_graphs=cuda_graphs
    )
    return greedy_ids(model, src, options, _prepared(model, src, options, max_len))[0]


def beam_search(
    model: Seq2SeqModel,
    src: Tensor,
    *,
    beam_size: int,
    bos_id: int,
    eos_id: int,
    max_len: int | Tensor,
    length_penalty: float = DecodingConfig.length_penalty,
    use_cache: bool = True,
    cuda_graphs: bool = True,
) -> list[list[int]]:
    """Beam search: the best hypothesis of each sentence as a list of ids without BOS and EOS; `cuda_graphs=False`
    keeps a GPU search eager."""
    options = SearchOptions.from_config(
        strategy="beam",
        beam_size=beam_size,
        bos_id=bos_id,
        eos_id=eos_id,
        length_penalty=length_penalty,
        use_cache=use_cache,
        cuda_graphs=cuda_graphs,
    )
    return [hyps[0].tokens for hyps in search(model, src, options, max_len=max_len)]
