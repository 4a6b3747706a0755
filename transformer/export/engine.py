"""Run a CTranslate2 export behind the interface of `transformer.translator.Translator`.

Same inputs (sentences), same outputs (ids and `Hypothesis` lists, best first,
in input order), same decoding settings: greedy, beam (power length penalty,
n-best), sampling, min_len, no_repeat_ngram_size and the output limit
a·(source tokens + EOS) + b. Beam search is the same search as ours: CTranslate2
by default stops a sentence once `beam_size` hypotheses have finished, ours
once no live hypothesis can beat the best finished ones; with `exact=True` its
patience is raised so that it searches to the same end (`exact=False` is
CTranslate2's own, faster rule). Ours never generates pad or BOS; CTranslate2
can only suppress a token before the softmax, which would shift every score,
so it is left free to (a trained model never ranks them near the top).
`token_scores` are not reported (empty). Sampling draws from one random stream
per translator, seeded by decoding.seed when it is built (CTranslate2 seeds each
worker thread once): the same command gives the same samples, but a second
search of the same translator continues the stream.
"""

from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

import ctranslate2
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from transformer.beam import penalty_divisor
from transformer.config import DecodingConfig
from transformer.errors import UserError
from transformer.export.ctranslate2 import CONFIG_FILE
from transformer.search_state import Hypothesis, SearchOptions, strip_eos
from transformer.tokenizer import EOS_ID, Tokenizer
from transformer.translator import encode_sources


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


class CTranslate2Translator:
    """A CTranslate2 export, its tokenizer and the decoding settings; `search`/`translate` as `Translator`'s."""

    def __init__(self, directory: str, cfg: DecodingConfig, device: str = "cpu", exact: bool = True, **options):
        """`device`: cpu, cuda or auto; `options` go to `ctranslate2.Translator` (compute_type, intra_threads)."""
        self.options = SearchOptions.from_config(cfg)  # ValueError on impossible settings
        _check(self.options)
        self.export, self.tokenizer = load_export(directory)
        self.cfg, self.exact = cfg, exact
        self.max_positions = int(self.export.config.model.max_positions)
        ctranslate2.set_random_seed(cfg.seed)  # each worker thread seeds its generator from it when it first samples
        try:
            self.engine = ctranslate2.Translator(directory, device=device, **options)
        except (RuntimeError, ValueError) as err:
            raise UserError(f"{directory}: CTranslate2 cannot load it ({err})") from err

    def _arguments(self, options: SearchOptions, max_len: int) -> dict:
        """translate_batch arguments for `options` and an output limit."""
        arguments = dict(
            max_decoding_length=max_len,
            min_decoding_length=options.min_len,
            no_repeat_ngram_size=options.no_repeat_ngram_size,
            return_scores=True,
            return_end_token=True,  # so that a hypothesis' length counts its EOS, as ours does
            max_input_length=0,
        )
        if options.strategy == "beam":
            alpha = 0.0 if options.length_penalty_kind == "none" else options.length_penalty
            patience = float(max_len) if self.exact else 1.0  # beam·max_len finished ones: every one there can be
            beam = dict(beam_size=options.beam_size, num_hypotheses=options.n_best, patience=patience)
            return arguments | beam | dict(length_penalty=alpha)
        arguments |= dict(beam_size=1, length_penalty=0.0)  # greedy and sampling score the raw log-probability
        if options.strategy == "sample":
            top_k = min(options.top_k, self.tokenizer.tgt_vocab_size)  # 0 = all, as ours
            arguments |= dict(
                sampling_topk=top_k, sampling_topp=options.top_p, sampling_temperature=options.temperature
            )
        return arguments

    def _hypotheses(self, result, options: SearchOptions) -> list[Hypothesis]:
        beam = options.strategy == "beam"
        alpha, kind = (options.length_penalty, options.length_penalty_kind) if beam else (0.0, "none")
        hyps = []
        for pieces, score in zip(result.hypotheses, result.scores):
            ids = [self.tokenizer.tgt.piece_to_id(p) for p in pieces]
            hyps.append(Hypothesis(strip_eos(ids, EOS_ID), score, score * penalty_divisor(len(ids), alpha, kind), []))
        return hyps

    def search(
        self, sentences: list[str], progress: bool = False, options: SearchOptions | None = None, generator=None
    ) -> list[tuple[list[int], list[Hypothesis]]]:
        """Each sentence's source ids and hypotheses (best first), in input order; as `Translator.search`.

        `generator` is not used: CTranslate2 samples from its own generator (see the module docstring).
        """
        options = options or self.options
        _check(options)
        ids, todo = encode_sources(self.tokenizer, sentences, self.max_positions, self.cfg.tag)
        out: list[tuple[list[int], list[Hypothesis]]] = [(x, []) for x in ids]
        todo.sort(key=lambda i: len(ids[i]))
        lengths = torch.tensor([len(ids[i]) + 1 for i in todo], dtype=torch.long)  # EOS included
        max_len = dict(zip(todo, options.output_limits(lengths, self.max_positions).tolist()))
        with tqdm(total=len(todo), desc="translating", unit="sent", disable=not progress, leave=False) as bar:
            for limit_of_group, same in groupby(todo, key=max_len.get):  # CTranslate2 takes one limit per call
                rows = list(same)
                for start in range(0, len(rows), self.cfg.batch_size):
                    batch = rows[start : start + self.cfg.batch_size]
                    pieces = [[self.tokenizer.src.id_to_piece(t) for t in ids[i]] for i in batch]
                    results = self.engine.translate_batch(pieces, **self._arguments(options, limit_of_group))
                    for i, result in zip(batch, results):
                        out[i] = (ids[i], self._hypotheses(result, options))
                    bar.update(len(batch))
        return out

    def detokenize(self, hyps: list[Hypothesis]) -> list[str]:
        """The text of each hypothesis."""
        return self.tokenizer.decode_tgt([h.tokens for h in hyps])

    def translate_nbest(
        self, sentences: list[str], progress: bool = False, options: SearchOptions | None = None, generator=None
    ) -> list[list[tuple[str, float]]]:
        """(translation, score) lists, best first, in input order; an untranslated sentence gets [("", 0.0)]."""
        results = []
        for _, hyps in self.search(sentences, progress, options):
            results.append([(text, h.score) for text, h in zip(self.detokenize(hyps), hyps)] or [("", 0.0)])
        return results

    def translate(
        self, sentences: list[str], progress: bool = False, options: SearchOptions | None = None, generator=None
    ) -> list[str]:
        """The best translation of each sentence, in input order; a blank sentence translates to ''."""
        return [hyps[0][0] for hyps in self.translate_nbest(sentences, progress, options)]


def _check(options: SearchOptions) -> None:
    if options.strategy == "beam" and options.length_penalty_kind == "gnmt":
        raise UserError("decoding.length_penalty_kind=gnmt is not available with engine=ctranslate2: use power")
