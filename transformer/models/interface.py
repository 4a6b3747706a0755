"""What the search, the translator, plotting and the service need from a model (`Seq2SeqModel`), and what a model is
sized for (`Vocabularies`, which `data.tokenizer.Tokenizer` satisfies).

Both families (`models.transformer.Transformer`, `models.rnn.RNNModel`) and the inference copies of `fast_inference`
satisfy it structurally, as any other model may (e.g. an ensemble of them); nothing here imports a model.
Shapes: B sentences, G hypotheses per sentence, N = B·G rows, S source length, T target positions, V vocabulary.
"""

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from torch import Tensor, nn


class Vocabularies(Protocol):
    """The vocabularies a model is built for: their sizes, and whether both sides share one."""

    @property
    def src_vocab_size(self) -> int: ...

    @property
    def tgt_vocab_size(self) -> int: ...

    @property
    def joint(self) -> bool: ...


@runtime_checkable
class SearchCache(Protocol):
    """A decoder's state across search steps (`decoder_cache.DecoderCache`, `rnn.RNNCache`)."""

    def reorder(self, rows: Tensor, sentences: Tensor | None = None) -> None:
        """Keep `rows` (N',) in that order, repeats allowed (N' may exceed N: beam search decodes one row per
        sentence first, then its hypotheses); `sentences` shrinks the per-sentence parts when some leave the batch."""
        ...


@runtime_checkable
class Seq2SeqModel(Protocol):
    """An encoder-decoder the search can drive step by step and whose cross-attention can be shown."""

    pad_id: int
    max_positions: int  # positions a target may fill, BOS included: outputs are at most max_positions - 1 tokens

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Source ids (B, S) -> the memory the decoder reads and the source mask, each indexed by sentence first."""
        ...

    def init_cache(self, memory: Tensor, group: int, max_len: int) -> SearchCache:
        """A cache for `group` hypotheses per sentence of `memory` (the search asks for 1), up to `max_len` steps."""
        ...

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, cache: Any = None) -> Tensor:
        """Target ids (N, T) -> next-token logits (N, T, V); with a cache `tgt_in` holds only the new positions."""
        ...

    @property
    def cross_attention_layers(self) -> int:
        """How many layers `cross_attention` gives weights for."""
        ...

    def cross_attention(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced cross-attention probabilities (layers, B, heads, T, S)."""
        ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]:
        """The weights (their device is where the search runs)."""
        ...

    def eval(self) -> Any:
        """Inference mode (no dropout)."""
        ...
