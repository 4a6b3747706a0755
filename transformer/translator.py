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
from transformer.decoding import Hypothesis, SearchOptions, search
from transformer.fast_inference import inference_copy
from transformer.model import Transformer
from transformer.tokenizer import EOS_ID, Tokenizer

log = logging.getLogger(__name__)


def encode_sources(
    tokenizer: Tokenizer, sentences: list[str], max_positions: int, tag: str = ""
) -> tuple[list[list[int]], list[int]]:
    """Source ids of every sentence (with `tag`'s piece first) and the indices of those to search: not blank and
    short enough for the model (EOS included); a sentence too long is logged and left untranslated."""
    stripped = [s.strip() for s in sentences]
    ids = [x if s else [] for s, x in zip(stripped, tokenizer.encode_src(stripped, tag))]
    limit = max_positions - 1  # room for EOS
    for i, x in enumerate(ids):
        if len(x) > limit:
            log.error(
                "sentence %d has %d tokens, more than the model's limit of %d; it is left untranslated "
                "(an empty line); split it into shorter sentences",
                i + 1,
                len(x),
                limit,
            )
    return ids, [i for i, x in enumerate(ids) if 0 < len(x) <= limit]


class Translator:
    """A model, its tokenizer and the decoding settings; several threads may translate with it at once.

    A call holds no state on the translator: its options (default: those of `cfg`) and its
    sampling generator (default: a new one seeded with `cfg.seed` on the model's device) are its own.
    """

    def __init__(self, model: Transformer, tokenizer: Tokenizer, cfg: DecodingConfig):
        self.model, self.tokenizer, self.cfg = model, tokenizer, cfg
        self.options = SearchOptions.from_config(cfg)  # ValueError on impossible settings

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def generator(self) -> torch.Generator:
        """A fresh sampling generator on the model's device, seeded with `cfg.seed`."""
        return torch.Generator(device=self.device).manual_seed(self.cfg.seed)

    def _batches(self, ids: list[list[int]]) -> Iterator[list[int]]:
        """Indices of sentences in batches of similar length."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), self.cfg.batch_size):
            yield order[start : start + self.cfg.batch_size]

    def search(
        self,
        sentences: list[str],
        progress: bool = False,
        options: SearchOptions | None = None,
        generator: torch.Generator | None = None,
    ) -> list[tuple[list[int], list[Hypothesis]]]:
        """Each sentence's source ids and hypotheses (best first), in input order.

        A blank sentence, or one longer than the model allows (logged), gets no hypotheses.
        """
        options = options or self.options
        if generator is None and options.strategy == "sample":
            generator = self.generator()
        ids, todo = encode_sources(self.tokenizer, sentences, self.model.max_positions, self.cfg.tag)
        out: list[tuple[list[int], list[Hypothesis]]] = [(x, []) for x in ids]
        model = inference_copy(self.model)  # one copy (packed once) for every batch of this call
        with tqdm(total=len(todo), desc="translating", unit="sent", disable=not progress, leave=False) as bar:
            for batch in self._batches([ids[i] for i in todo]):
                rows = [todo[j] for j in batch]
                src = pad([ids[i] + [EOS_ID] for i in rows]).to(self.device)
                for i, hyps in zip(rows, search(model, src, options, generator)):
                    out[i] = (ids[i], hyps)
                bar.update(len(rows))
        return out

    def detokenize(self, hyps: list[Hypothesis]) -> list[str]:
        """The text of each hypothesis."""
        return self.tokenizer.decode_tgt([h.tokens for h in hyps])

    def translate_nbest(
        self,
        sentences: list[str],
        progress: bool = False,
        options: SearchOptions | None = None,
        generator: torch.Generator | None = None,
    ) -> list[list[tuple[str, float]]]:
        """(translation, score) lists, best first, in input order; an untranslated sentence gets [("", 0.0)]."""
        results = []
        for _, hyps in self.search(sentences, progress, options, generator):
            results.append([(text, h.score) for text, h in zip(self.detokenize(hyps), hyps)] or [("", 0.0)])
        return results

    def translate(
        self,
        sentences: list[str],
        progress: bool = False,
        options: SearchOptions | None = None,
        generator: torch.Generator | None = None,
    ) -> list[str]:
        """The best translation of each sentence, in input order; a blank sentence translates to ''."""
        return [hyps[0][0] for hyps in self.translate_nbest(sentences, progress, options, generator)]
