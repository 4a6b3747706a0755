"""Text in, text out: tokenize, batch by length, search, detokenize, restore order.

Validation during training, `transformer-evaluate` and `transformer-translate`
all go through `Translator`, so they decode with identical settings.
"""

import logging
from collections.abc import Iterator

import torch
from tqdm import tqdm

from transformer.batching import pad
from transformer.config import DecodingConfig
from transformer.decoding import beam_search, greedy_decode
from transformer.model import Transformer
from transformer.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer

log = logging.getLogger(__name__)


class Translator:
    """A model, its tokenizer and the decoding settings."""

    def __init__(self, model: Transformer, tokenizer: Tokenizer, cfg: DecodingConfig):
        if cfg.strategy not in ("greedy", "beam"):
            raise ValueError(f"decoding.strategy={cfg.strategy!r}; choose greedy or beam")
        self.model, self.tokenizer, self.cfg = model, tokenizer, cfg

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def max_len(self, src_len: int) -> int:
        """Output limit for a source of `src_len` tokens, capped by the model's positions."""
        limit = int(self.cfg.max_len_a * src_len + self.cfg.max_len_b)
        return max(1, min(limit, self.model.max_positions - 1))

    def _search(self, src: torch.Tensor) -> list[list[int]]:
        max_len = self.max_len(src.size(1))
        if self.cfg.strategy == "beam":
            return beam_search(self.model, src, self.cfg.beam_size, BOS_ID, EOS_ID, max_len, self.cfg.length_penalty)
        out = greedy_decode(self.model, src, BOS_ID, EOS_ID, max_len).tolist()
        return [[t for t in row if t not in (EOS_ID, PAD_ID)] for row in out]

    def _batches(self, ids: list[list[int]]) -> Iterator[list[int]]:
        """Indices of sentences in batches of similar length."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), self.cfg.batch_size):
            yield order[start : start + self.cfg.batch_size]

    def translate(self, sentences: list[str], progress: bool = False) -> list[str]:
        """Translations in input order; an empty or blank sentence translates to ''."""
        ids = self.tokenizer.encode_src([s.strip() for s in sentences])
        limit = self.model.max_positions - 1
        long = sum(len(x) > limit for x in ids)
        if long:
            log.warning("%d sentences exceed the model's %d positions; their ends are cut", long, limit)
        out = [""] * len(sentences)
        todo = [i for i, x in enumerate(ids) if x]
        bar = tqdm(total=len(todo), desc="translating", unit="sent", disable=not progress, leave=False)
        for batch in self._batches([ids[i] for i in todo]):
            rows = [todo[j] for j in batch]
            src = pad([ids[i][:limit] + [EOS_ID] for i in rows]).to(self.device)
            for i, hyp in zip(rows, self.tokenizer.decode_tgt(self._search(src))):
                out[i] = hyp
            bar.update(len(rows))
        bar.close()
        return out
