"""Text in, text out: tokenize, batch by length, search, detokenize, restore order.

Validation during training, `transformer-evaluate`, `transformer-translate` and the
service all go through `Translator`, so they decode with identical settings;
`TextTranslator` is the text-level front it shares with the CTranslate2 engine
(`transformer.decoding.ctranslate2_engine`), which searches an export instead.
"""

import copy
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator

import torch
from tqdm import tqdm

from transformer.core.config import DecodingConfig
from transformer.core.special_ids import EOS_ID
from transformer.data.batching import pad
from transformer.data.tokenizer import Tokenizer
from transformer.decoding.given_pairs import GivenPairs, Unscored, encode_pairs
from transformer.decoding.scoring import Scored, score
from transformer.decoding.search_state import Hypothesis, SearchOptions
from transformer.decoding.searching import search
from transformer.decoding.steered_text import steered_text, target_pieces
from transformer.decoding.text_controls import Steer, TextControls
from transformer.fast_inference import decoded_in, inference_copy
from transformer.fast_inference.compiled import compiled_step
from transformer.models.interface import Seq2SeqModel

log = logging.getLogger(__name__)

Searched = list[tuple[list[int], list[Hypothesis]]]  # per sentence: source ids, hypotheses best first


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


class TextTranslator(ABC):
    """Sentences in, hypotheses or texts out, over an engine that searches batches of source ids.

    A call holds no state on the translator: its options (default: those of `cfg`) and its
    sampling generator are its own. A call may steer each sentence with a prefix (`steered_text`); `cfg` steers
    every sentence with its suppressed phrases and alternatives.
    """

    tokenizer: Tokenizer
    max_positions: int  # the longest source (EOS included) the engine takes
    precision: str  # what the engine searches in (fp32, int8, ...): a BLEU figure states it
    spells_words: bool = True  # whether its search can complete a prefix's unfinished word (`steered_text`)

    def __init__(self, cfg: DecodingConfig):
        self.cfg, self.options = cfg, SearchOptions.from_config(cfg)  # ValueError on impossible settings
        self._pieces: list[str] | None = None

    @abstractmethod
    def _search_batches(
        self,
        ids: list[list[int]],
        todo: list[int],
        options: SearchOptions,
        generator: torch.Generator | None,
        steer: Steer,
    ) -> Iterator[tuple[list[int], list[list[Hypothesis]]]]:
        """Search the sentences `todo` (indices into `ids`) batch by batch, each steered by `steer` of its
        indices: (indices, their hypotheses)."""

    @abstractmethod
    def _score_batches(
        self, pairs: GivenPairs, todo: list[int], options: SearchOptions
    ) -> Iterator[tuple[list[int], list[Scored]]]:
        """Score the pairs `todo` (indices into `pairs`) batch by batch: (indices, their scores)."""

    def given(self, sources: list[str], targets: list[str]) -> GivenPairs:
        """Pairs to score, encoded and checked (`decoding.given_pairs`)."""
        return encode_pairs(self.tokenizer, sources, targets, self.max_positions, self.cfg.tag)

    def score(
        self, sources: list[str] | GivenPairs, targets: list[str] | None = None, options: SearchOptions | None = None
    ) -> list[Scored | Unscored]:
        """The score of each target as the translation of its source (`decoding.scoring`: as the beam scores its
        own hypotheses, under `options`' length penalty), in input order; a pair that cannot be scored gets why.
        `sources` may be pairs `given` encoded already (then no `targets`)."""
        pairs = sources if isinstance(sources, GivenPairs) else self.given(sources, targets or [])
        out: list[Scored | Unscored] = list(pairs.problems)  # type: ignore[arg-type]  (None: filled below)
        for rows, scored in self._score_batches(pairs, pairs.todo, options or self.options):
            for i, result in zip(rows, scored):
                out[i] = result
        return out

    def pieces(self) -> list[str] | None:
        """The target pieces by id (`steered_text.target_pieces`) where this engine spells words, else None."""
        if self.spells_words and self._pieces is None:
            self._pieces = target_pieces(self.tokenizer)
        return self._pieces if self.spells_words else None

    def controls(self) -> TextControls:
        """This translator's steering of a call (`decoding.text_controls`), with its current settings."""
        return TextControls(self.tokenizer, self.cfg, self.max_positions, self.pieces())

    def search(
        self,
        sentences: list[str],
        progress: bool = False,
        options: SearchOptions | None = None,
        generator: torch.Generator | None = None,
        bar: tqdm | None = None,
        prefixes: list[str] | None = None,
        constraints: list[list[str]] | None = None,
    ) -> Searched:
        """Each sentence's source ids and hypotheses (best first), in input order.

        A blank sentence, or one longer than the model allows (logged), gets no hypotheses. `bar`: a progress bar
        to advance instead of this call's own. `prefixes`: the target text each translation starts with ("": none);
        `constraints`: the target phrases each must hold (with `cfg.glossary`'s terms; beam search). A sentence
        whose prefix and constraints are wrong or do not fit gets no hypotheses (logged).
        """
        options = options or self.options
        ids, todo = encode_sources(self.tokenizer, sentences, self.max_positions, self.cfg.tag)
        steer, todo = self.controls().prepare(sentences, ids, todo, prefixes, constraints, options)
        out: Searched = [(x, []) for x in ids]
        disable = not progress or bar is not None
        with tqdm(total=len(todo), desc="translating", unit="sent", disable=disable, leave=False) as own:
            for rows, hyps in self._search_batches(ids, todo, options, generator, steer):
                for i, sentence_hyps in zip(rows, hyps):
                    out[i] = (ids[i], sentence_hyps)
                (own if bar is None else bar).update(len(rows))  # a bar without a total has no truth value
        return out

    def generator(self, seed: int | None = None) -> torch.Generator | None:
        """A sampling generator seeded with `seed` (default: `cfg.seed`); None: this engine samples from its own."""
        return None

    def detokenize(self, hyps: list[Hypothesis], prefix: str = "") -> list[str]:
        """The text of each hypothesis; searched after `prefix`, it starts with `prefix` exactly."""
        if not prefix.strip():
            return self.tokenizer.decode_tgt([h.tokens for h in hyps])
        typed = self.controls().typed(prefix)
        return [steered_text(self.tokenizer, typed, h) for h in hyps]

    def translate_nbest(
        self,
        sentences: list[str],
        progress: bool = False,
        options: SearchOptions | None = None,
        generator: torch.Generator | None = None,
        prefixes: list[str] | None = None,
        constraints: list[list[str]] | None = None,
    ) -> list[list[tuple[str, float]]]:
        """(translation, score) lists, best first, in input order; an untranslated sentence gets [("", 0.0)].
        `prefixes`, `constraints`: as `search`'s."""
        results = []
        found = self.search(sentences, progress, options, generator, prefixes=prefixes, constraints=constraints)
        for (_, hyps), prefix in zip(found, prefixes or [""] * len(found)):
            results.append([(text, h.score) for text, h in zip(self.detokenize(hyps, prefix), hyps)] or [("", 0.0)])
        return results

    def translate(
        self,
        sentences: list[str],
        progress: bool = False,
        options: SearchOptions | None = None,
        generator: torch.Generator | None = None,
        prefixes: list[str] | None = None,
        constraints: list[list[str]] | None = None,
    ) -> list[str]:
        """The best translation of each sentence, in input order; a blank sentence translates to ''."""
        found = self.translate_nbest(sentences, progress, options, generator, prefixes, constraints)
        return [hyps[0][0] for hyps in found]


class Translator(TextTranslator):
    """A model, its tokenizer and the decoding settings; several threads may translate with it at once.

    The model's `inference_copy` in `cfg.precision` is made here, once, and searched by every call: weights changed
    in place later are not seen (training builds a new translator for each validation). A call's
    sampling generator defaults to a new one seeded with `cfg.seed` on the model's device.
    """

    def __init__(self, model: Seq2SeqModel, tokenizer: Tokenizer, cfg: DecodingConfig):
        super().__init__(cfg)
        self.model, self.tokenizer, self.max_positions = model, tokenizer, model.max_positions
        self.inference_model = inference_copy(model, cfg.precision)
        self.precision = decoded_in(model, cfg.precision)
        if cfg.compiled and self.inference_model is not model:  # a copy may carry its compiled step
            self.inference_model.compiled_step = compiled_step(model, self.precision)

    def with_config(self, cfg: DecodingConfig) -> "Translator":
        """This translator (same model and inference copy, so the same precision) with other decoding settings."""
        other = copy.copy(self)
        other.cfg, other.options = cfg, SearchOptions.from_config(cfg)
        return other

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def generator(self, seed: int | None = None) -> torch.Generator:
        """A fresh sampling generator on the model's device, seeded with `seed` (default: `cfg.seed`)."""
        return torch.Generator(device=self.device).manual_seed(self.cfg.seed if seed is None else seed)

    def _batches(self, ids: list[list[int]]) -> Iterator[list[int]]:
        """Indices of sentences in batches of similar length."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), self.cfg.batch_size):
            yield order[start : start + self.cfg.batch_size]

    def _score_batches(
        self, pairs: GivenPairs, todo: list[int], options: SearchOptions
    ) -> Iterator[tuple[list[int], list[Scored]]]:
        for batch in self._batches([pairs.src_ids[i] + pairs.tgt_ids[i] for i in todo]):
            rows = [todo[j] for j in batch]
            src = pad([pairs.src_ids[i] + [EOS_ID] for i in rows]).to(self.device)
            yield rows, score(self.inference_model, src, [pairs.tgt_ids[i] for i in rows], options)

    def _search_batches(
        self,
        ids: list[list[int]],
        todo: list[int],
        options: SearchOptions,
        generator: torch.Generator | None,
        steer: Steer,
    ) -> Iterator[tuple[list[int], list[list[Hypothesis]]]]:
        if generator is None:  # one stream for the whole call, whatever the strategy draws
            generator = self.generator()
        for batch in self._batches([ids[i] for i in todo]):
            rows = [todo[j] for j in batch]
            src = pad([ids[i] + [EOS_ID] for i in rows]).to(self.device)
            text = self.tokenizer.decode_tgt
            yield rows, search(self.inference_model, src, options, generator, text=text, controls=steer(rows))
