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
from transformer.decoding import Hypothesis, beam_search_hypotheses, greedy_decode, sample_decode
from transformer.linear import packed_weights
from transformer.model import Transformer
from transformer.tokenizer import BOS_ID, EOS_ID, PAD_ID, Tokenizer

log = logging.getLogger(__name__)


class Translator:
    """A model, its tokenizer and the decoding settings."""

    def __init__(self, model: Transformer, tokenizer: Tokenizer, cfg: DecodingConfig):
        if cfg.strategy not in ("greedy", "beam", "sample"):
            raise ValueError(f"decoding.strategy={cfg.strategy!r}; choose greedy, beam or sample")
        self.model, self.tokenizer, self.cfg = model, tokenizer, cfg
        self.generator = torch.Generator().manual_seed(cfg.seed)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def max_len(self, src_lengths: torch.Tensor) -> torch.Tensor:
        """Per-sentence output limits a·len+b (source length incl. EOS), capped by the model's positions."""
        limit = (self.cfg.max_len_a * src_lengths + self.cfg.max_len_b).long()
        return limit.clamp(1, self.model.max_positions - 1)

    def _search(self, src: torch.Tensor) -> list[list[Hypothesis]]:
        """Hypotheses (best first) for each row of `src` (B, S)."""
        cfg, model = self.cfg, self.model
        max_len = self.max_len((src != PAD_ID).sum(1))
        common = dict(min_len=cfg.min_len, no_repeat_ngram_size=cfg.no_repeat_ngram_size)
        if cfg.strategy == "beam":
            return beam_search_hypotheses(
                model,
                src,
                cfg.beam_size,
                BOS_ID,
                EOS_ID,
                max_len,
                cfg.length_penalty,
                cfg.length_penalty_kind,
                cfg.n_best,
                **common,
            )
        if cfg.strategy == "sample":
            ids = sample_decode(
                model,
                src,
                BOS_ID,
                EOS_ID,
                max_len,
                cfg.top_k,
                cfg.top_p,
                cfg.temperature,
                self.generator.manual_seed(cfg.seed),
                **common,
            )
            scores = torch.zeros_like(ids, dtype=torch.float)
        else:
            ids, scores = greedy_decode(model, src, BOS_ID, EOS_ID, max_len, return_scores=True, **common)
        hyps = []
        for row, row_scores in zip(ids.tolist(), scores.tolist()):
            n = row.index(EOS_ID) + 1 if EOS_ID in row else len([t for t in row if t != PAD_ID])
            total = sum(row_scores[:n])
            hyps.append([Hypothesis(row[: n - 1] if row[n - 1] == EOS_ID else row[:n], total, total, row_scores[:n])])
        return hyps

    def _batches(self, ids: list[list[int]]) -> Iterator[list[int]]:
        """Indices of sentences in batches of similar length."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), self.cfg.batch_size):
            yield order[start : start + self.cfg.batch_size]

    def search(self, sentences: list[str], progress: bool = False) -> list[tuple[list[int], list[Hypothesis]]]:
        """Each sentence's source ids and hypotheses (best first), in input order.

        A blank sentence, or one longer than the model allows (logged), gets no hypotheses.
        """
        ids = self.tokenizer.encode_src([s.strip() for s in sentences])
        limit = self.model.max_positions - 1  # room for EOS
        for i, x in enumerate(ids):
            if len(x) > limit:
                log.error(
                    "sentence %d has %d tokens, more than the model's limit of %d; it is left untranslated "
                    "(an empty line); split it into shorter sentences",
                    i + 1,
                    len(x),
                    limit,
                )
        out: list[tuple[list[int], list[Hypothesis]]] = [(x, []) for x in ids]
        todo = [i for i, x in enumerate(ids) if 0 < len(x) <= limit]
        bar = tqdm(total=len(todo), desc="translating", unit="sent", disable=not progress, leave=False)
        with bar, packed_weights(self.model):  # packed once for every batch, not once per batch
            for batch in self._batches([ids[i] for i in todo]):
                rows = [todo[j] for j in batch]
                src = pad([ids[i] + [EOS_ID] for i in rows]).to(self.device)
                for i, hyps in zip(rows, self._search(src)):
                    out[i] = (ids[i], hyps)
                bar.update(len(rows))
        return out

    def translate_nbest(self, sentences: list[str], progress: bool = False) -> list[list[tuple[str, float]]]:
        """(translation, score) lists, best first, in input order; an untranslated sentence gets [("", 0.0)]."""
        results = []
        for _, hyps in self.search(sentences, progress):
            texts = self.tokenizer.decode_tgt([h.tokens for h in hyps])
            results.append([(text, h.score) for text, h in zip(texts, hyps)] or [("", 0.0)])
        return results

    def translate(self, sentences: list[str], progress: bool = False) -> list[str]:
        """The best translation of each sentence, in input order; a blank sentence translates to ''."""
        return [hyps[0][0] for hyps in self.translate_nbest(sentences, progress)]
