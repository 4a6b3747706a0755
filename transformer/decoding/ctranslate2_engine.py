"""Run a CTranslate2 export behind the text-level front of `transformer.decoding.translator.Translator`.

Same inputs (sentences), same outputs (ids and `Hypothesis` lists, best first,
in input order), same decoding settings: greedy, beam (power length penalty,
n-best), sampling, min_len, no_repeat_ngram_size and the output limit
a·(source tokens + EOS) + b. Beam search is the same search as ours: CTranslate2
by default stops a sentence once `beam_size` hypotheses have finished, ours
once no live hypothesis can beat the best finished ones; with `exact=True` its
patience is raised so that it searches to the same end (`exact=False` is
CTranslate2's own, faster rule). Ours never generates pad or BOS, and scores
every token by the model's own log-probability; CTranslate2 can only suppress a
token before the softmax, which would raise every other token's score. So a
batch is searched free first, and only the sentences whose hypotheses hold
`<pad>` or `<s>` (a weakly trained model's favourites) are searched again with
them suppressed and their hypotheses rescored by the model (`score_batch`):
greedy search then gives our ids and scores, beam search ranks by the
suppressed scores. Suppressed phrases (`decoding.suppress`, `ban_unk`) go to CTranslate2 the same way, and
alternatives (`decoding.alternatives`, whose first piece CTranslate2 scores as if the sentence could not end
there): such hypotheses are rescored by the model, so greedy search and alternatives give our ids and scores (at
length penalty 0: CTranslate2 divides an alternative's continuation by its own length, ours by the whole), and
beam search with suppressed phrases ranks by the raised scores. `token_scores` are not reported (empty).
Sampling draws from one random stream per translator, seeded by decoding.seed when it is built
(CTranslate2 seeds each worker thread once): the same command gives the same
samples, but a second search of the same translator continues the stream.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

import ctranslate2
import torch
from omegaconf import DictConfig, OmegaConf

from transformer.core.config import DecodingConfig
from transformer.core.errors import UserError
from transformer.core.precision import named
from transformer.core.special_ids import BOS_ID, EOS_ID, PAD_ID
from transformer.core.strategies import STRATEGIES
from transformer.data.tokenizer import Tokenizer
from transformer.decoding.beam import penalty_divisor
from transformer.decoding.given_pairs import GivenPairs
from transformer.decoding.scoring import Scored, scored
from transformer.decoding.search_state import Hypothesis, SearchOptions, strip_eos
from transformer.decoding.steering import Controls, forced_lengths
from transformer.decoding.text_controls import Steer
from transformer.decoding.translator import TextTranslator

CONFIG_FILE = "transformer_config.yaml"  # an export's training config, for `transformer-evaluate split=...`


@dataclass
class Export:
    """What an export folder restores besides the engine: where it is and the training config."""

    path: Path  # the folder's model.bin (evaluate names its output after the checkpoint file)
    config: DictConfig
    meta: dict[str, str]


def load_export(directory: str) -> tuple[Export, Tokenizer]:
    """The training config and tokenizer of a `transformer-export format=ctranslate2` folder."""
    folder = Path(directory)
    if not (folder / "model.bin").is_file() or not (folder / CONFIG_FILE).is_file():
        raise UserError(
            f"{folder} is not a CTranslate2 export of this tool (no model.bin and {CONFIG_FILE}); "
            f"make one with transformer-export checkpoint=RUN format=ctranslate2 output={folder}"
        )
    config = OmegaConf.create((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    return Export(folder / "model.bin", config, {}), Tokenizer.load(folder)


class CTranslate2Translator(TextTranslator):
    """A CTranslate2 export, its tokenizer and the decoding settings; `search`/`translate` as `Translator`'s.

    A call's `generator` is not used: CTranslate2 samples from its own (see the module docstring). A prefix is
    forced as SentencePiece splits it, an unfinished last word too (CTranslate2's `target_prefix`).
    """

    spells_words = False

    def __init__(self, directory: str, cfg: DecodingConfig, device: str = "cpu", exact: bool = True, **options):
        """`device`: cpu, cuda or auto; `options` go to `ctranslate2.Translator` (compute_type, intra_threads)."""
        super().__init__(cfg)
        STRATEGIES[self.options.strategy].ctranslate2(self.options, 0)  # refuses what CTranslate2 cannot do
        self.export, self.tokenizer = load_export(directory)
        self.max_positions, self.exact = int(self.export.config.model.max_positions), exact
        self.never = {self.tokenizer.tgt.id_to_piece(i) for i in (PAD_ID, BOS_ID)}  # our search never generates them
        ctranslate2.set_random_seed(cfg.seed)  # each worker thread seeds its generator from it when it first samples
        try:
            self.engine = ctranslate2.Translator(directory, device=device, **options)
        except (RuntimeError, ValueError) as err:
            raise UserError(f"{directory}: CTranslate2 cannot load it ({err})") from err
        self.precision = named(self.engine.compute_type)

    def _arguments(self, options: SearchOptions, max_len: int, controls: Controls | None) -> dict:
        """translate_batch arguments for `options`, an output limit and the batch's `controls`."""
        arguments = dict(
            max_decoding_length=max_len,
            min_decoding_length=options.min_len,
            no_repeat_ngram_size=options.no_repeat_ngram_size,
            return_scores=True,
            return_end_token=True,  # so that a hypothesis' length counts its EOS, as ours does
            max_input_length=0,
        )
        strategy = STRATEGIES[options.strategy].ctranslate2(options, self.tokenizer.tgt_vocab_size)
        if "num_hypotheses" in strategy:  # beam search: as ours, every finished hypothesis there can be (see above)
            strategy["patience"] = float(max_len) if self.exact else 1.0
        if controls is not None and controls.prefixes is not None:
            arguments["target_prefix"] = [self._tgt_pieces(prefix) for prefix in controls.prefixes]
        if controls is not None and controls.alternatives:
            strategy |= dict(return_alternatives=True, num_hypotheses=controls.alternatives)
        return arguments | strategy

    def _tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self.tokenizer.tgt.id_to_piece(i) for i in ids]

    def _translate(
        self, pieces: list[list[str]], options: SearchOptions, max_len: int, controls: Controls | None
    ) -> list[list[Hypothesis]]:
        """The hypotheses of a batch of source pieces, none holding `<pad>` or `<s>`, scored as ours are (see the
        module docstring)."""
        if controls is not None and controls.constraints:
            raise UserError("engine=ctranslate2 has no constraints (nor glossary): use engine=pytorch")
        arguments = self._arguments(options, max_len, controls)
        suppress = [self._tgt_pieces(ids) for ids in controls.suppress] if controls is not None else []
        forced = forced_lengths(controls, len(pieces))
        results = self.engine.translate_batch(pieces, suppress_sequences=suppress or None, **arguments)
        found = [result.hypotheses for result in results]
        alpha, hyps = arguments["length_penalty"], []
        for result, n in zip(results, forced):
            pairs = zip(result.hypotheses, result.scores)
            hyps.append([self._hypothesis(t, score, score * _divisor(t, alpha), n) for t, score in pairs])
        again = [j for j, targets in enumerate(found) if any(self.never.intersection(t[forced[j] :]) for t in targets)]
        if again:
            redo = dict(arguments, suppress_sequences=suppress + [[piece] for piece in sorted(self.never)])
            if "target_prefix" in redo:
                redo["target_prefix"] = [redo["target_prefix"][j] for j in again]
            for j, result in zip(again, self.engine.translate_batch([pieces[j] for j in again], **redo)):
                found[j] = result.hypotheses
        alternatives = bool(controls is not None and controls.alternatives)
        for j in range(len(pieces)) if suppress or alternatives else again:
            hyps[j] = self._rescored(pieces[j], found[j], alpha, forced[j], alternatives)
        return hyps

    def _rescored(
        self, source: list[str], targets: list[list[str]], alpha: float, forced: int, alternatives: bool
    ) -> list[Hypothesis]:
        """The hypotheses `targets` scored by the model's own log-probabilities after their `forced` first pieces,
        over CTranslate2's length penalty `alpha`: best first, or as alternatives in their order (the first piece's
        log-probability added to the score of the rest: `decoding.alternatives`)."""
        scored = self.engine.score_batch([source] * len(targets), targets, max_input_length=0)
        hyps = []
        for target, result in zip(targets, scored):
            logprobs = result.log_probs[forced : len(target)]  # score_batch appends an EOS
            first = logprobs[0] if alternatives else 0.0
            score = (sum(logprobs) - first) / _divisor(target, alpha) + first
            hyps.append(self._hypothesis(target, score, sum(logprobs), forced))
        return hyps if alternatives else sorted(hyps, key=lambda h: h.score, reverse=True)

    def _hypothesis(self, target: list[str], score: float, logprob: float, forced: int) -> Hypothesis:
        """Our `Hypothesis` of target pieces (EOS included where generated), the first `forced` of them a prefix."""
        ids = [self.tokenizer.tgt.piece_to_id(p) for p in target]
        return Hypothesis(strip_eos(ids, EOS_ID), score, logprob, [], forced)

    def _search_batches(
        self, ids: list[list[int]], todo: list[int], options: SearchOptions, generator, steer: Steer
    ) -> Iterator[tuple[list[int], list[list[Hypothesis]]]]:
        STRATEGIES[options.strategy].ctranslate2(options, 0)  # refuses what CTranslate2 cannot do before any work
        todo = sorted(todo, key=lambda i: len(ids[i]))
        lengths = torch.tensor([len(ids[i]) + 1 for i in todo], dtype=torch.long)  # EOS included
        max_len = dict(zip(todo, options.output_limits(lengths, self.max_positions).tolist()))
        for limit_of_group, same in groupby(todo, key=max_len.get):  # CTranslate2 takes one limit per call
            rows = list(same)
            for start in range(0, len(rows), self.cfg.batch_size):
                batch = rows[start : start + self.cfg.batch_size]
                pieces = [self._src_pieces(ids[i]) for i in batch]
                yield batch, self._translate(pieces, options, limit_of_group, steer(batch))

    def _src_pieces(self, ids: list[int]) -> list[str]:
        return [self.tokenizer.src.id_to_piece(t) for t in ids]

    def _score_batches(
        self, pairs: GivenPairs, todo: list[int], options: SearchOptions
    ) -> Iterator[tuple[list[int], list[Scored]]]:
        """CTranslate2's `score_batch`: each token's log-probability, EOS last, scored as ours (`decoding.scoring`)."""
        todo = sorted(todo, key=lambda i: len(pairs.src_ids[i]) + len(pairs.tgt_ids[i]))
        for start in range(0, len(todo), self.cfg.batch_size):
            rows = todo[start : start + self.cfg.batch_size]
            sources = [self._src_pieces(pairs.src_ids[i]) for i in rows]
            targets = [self._tgt_pieces(pairs.tgt_ids[i]) for i in rows]
            results = self.engine.score_batch(sources, targets, max_input_length=0)
            yield rows, [scored(r.log_probs, options) for r in results]


def _divisor(target: list[str], alpha: float) -> float:
    """What CTranslate2 divides a hypothesis' log-probability by: its length to the power of the length penalty
    (0 for greedy and sampling: 1)."""
    return penalty_divisor(len(target), alpha)
