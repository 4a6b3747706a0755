"""Validation: loss, perplexity and BLEU on the same val sentences, and cross-attention images."""

import logging
import math
from dataclasses import dataclass

import datasets
import numpy as np
import sacrebleu
import torch
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from transformer.compute.runtime import autocast
from transformer.core.config import DecodingConfig, TrainerConfig
from transformer.data.batching import collate, token_batches
from transformer.data.tokenizer import Tokenizer
from transformer.decoding.heatmaps import attention_figure
from transformer.decoding.translator import Translator
from transformer.models.interface import Seq2SeqModel
from transformer.training import distributed
from transformer.training.loss import loss_sum

log = logging.getLogger(__name__)


@dataclass
class Scores:
    loss: float  # cross-entropy per target token, no label smoothing
    bleu: float
    precision: str  # what the search for `bleu` ran in (decoding.precision, as the Translator ran it)

    @property
    def ppl(self) -> float:
        return math.exp(min(self.loss, 50))

    def __str__(self) -> str:
        return f"val loss {self.loss:.3f} | ppl {self.ppl:.2f} | BLEU {self.bleu:.2f} ({self.precision})"


class Validator:
    """Scores the model on the first `trainer.val_max_sentences` pairs of the val split (all when 0), in batches of
    `trainer.batch_tokens` tokens for the loss and the search alike.

    Under torchrun each of the `world` processes scores every `world`-th of those pairs (rank `rank` the ones from
    index `rank` on), and one gather joins the loss sums and translations: validation takes 1/world of the time, and
    since every process validates at the same steps, none waits in a collective for another's whole validation.
    """

    def __init__(
        self,
        model: Seq2SeqModel,
        tokenizer: Tokenizer,
        val: datasets.Dataset,
        trainer: TrainerConfig,
        decoding: DecodingConfig,
        rank: int = 0,
        world: int = 1,
    ):
        """`trainer` gives the batch size, precision, sentences, images and progress bar; `decoding` the search."""
        self.model, self.tokenizer = model, tokenizer
        self.precision, self.attention_images = trainer.precision, trainer.attention_images
        self.progress = trainer.progress and rank == 0
        pairs = len(val["src"])
        n = min(trainer.val_max_sentences or pairs, pairs)
        if n < pairs and rank == 0:
            log.info("validating on the first %d of the %d val pairs (trainer.val_max_sentences)", n, pairs)
        self.src, self.ref = list(val["src"])[:n], list(val["tgt"])[:n]
        prefix = tokenizer.tag_prefix(decoding.tag)  # validating "as" a tagged corpus: its tag starts each source
        self.src_ids = [prefix + ids for ids in list(val["src_ids"])[:n]]
        self.tgt_ids = list(val["tgt_ids"])[:n]
        self.rows = np.arange(rank, n, world)  # this process' share
        lengths = np.array([[len(self.src_ids[i]) + 1, len(self.tgt_ids[i]) + 1] for i in self.rows])
        lengths = lengths.reshape(-1, 2)  # (share, 2): source and target lengths with EOS, also for an empty share
        self.batches = [self.rows[b] for b in token_batches(lengths, trainer.batch_tokens, rng=None) if len(b)]
        widest = max(map(len, self.batches), default=1)  # each token batch searched as one batch
        self.decoding = OmegaConf.merge(decoding, {"batch_size": widest})

    @torch.no_grad()
    def loss_sums(self) -> tuple[float, int]:
        """This process' share: the summed cross-entropy (no label smoothing) and its target tokens."""
        self.model.eval()
        device = next(self.model.parameters()).device
        total, tokens = 0.0, 0
        for rows in self.batches:
            batch = collate([self.src_ids[i] for i in rows], [self.tgt_ids[i] for i in rows]).to(device)
            with autocast(device, self.precision):
                total += loss_sum(self.model, batch, 0.0).item()
            tokens += batch.n_tokens
        return total, tokens

    def loss(self) -> float:
        """Cross-entropy per target token of this process' share (every sentence in a single process)."""
        total, tokens = self.loss_sums()
        return total / tokens

    def translator(self) -> Translator:
        """A translator on a fresh inference copy of the model: training changed its weights in place since the
        last one."""
        return Translator(self.model, self.tokenizer, self.decoding)

    def translations(self, translator: Translator) -> list[tuple[int, str]]:
        """(row, best translation) of each pair of this process' share."""
        out = []
        with tqdm(total=len(self.rows), desc="validating", unit="sent", disable=not self.progress, leave=False) as bar:
            for rows in self.batches:
                out += zip(rows.tolist(), translator.translate([self.src[i] for i in rows]))
                bar.update(len(rows))
        return out

    def __call__(self, writer: SummaryWriter | None, step: int) -> Scores:
        """Score the model (every process, with one gather); rank 0 (`writer`) writes val/loss, val/ppl, val/bleu
        and the attention images at `step`."""
        translator = self.translator()
        shares = distributed.all_gather((self.loss_sums(), self.translations(translator)))
        total, tokens = (sum(values) for values in zip(*(sums for sums, _ in shares)))
        hyps = [""] * len(self.src)
        for _, translated in shares:
            for row, hyp in translated:
                hyps[row] = hyp
        scores = Scores(total / tokens, sacrebleu.corpus_bleu(hyps, [self.ref]).score, translator.precision)
        if writer is not None:
            for name, value in (("loss", scores.loss), ("ppl", scores.ppl), ("bleu", scores.bleu)):
                writer.add_scalar(f"val/{name}", value, step)
            self._attention_images(translator, writer, step)
        return scores

    def _attention_images(self, translator: Translator, writer: SummaryWriter, step: int) -> None:
        """Cross-attention heatmaps of the first few val sentences, to watch alignment emerge."""
        sentences = self.src[: self.attention_images]
        for i, (src_ids, hyps) in enumerate(translator.search(sentences)):
            if hyps:
                fig = attention_figure(self.model, self.tokenizer, src_ids, hyps[0].tokens)
                writer.add_figure(f"attention/val_{i}", fig, step)
