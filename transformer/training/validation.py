"""Validation: loss, perplexity and BLEU on the same val sentences, and cross-attention images."""

import math
from dataclasses import dataclass

import datasets
import numpy as np
import sacrebleu
import torch
from torch.utils.tensorboard import SummaryWriter

from transformer.batching import collate, token_batches
from transformer.config import DecodingConfig, TrainerConfig
from transformer.interface import Seq2SeqModel
from transformer.loss import loss_sum
from transformer.plotting import attention_figure
from transformer.runtime import autocast
from transformer.tokenizer import Tokenizer
from transformer.translator import Translator


@dataclass
class Scores:
    loss: float  # cross-entropy per target token, no label smoothing
    bleu: float

    @property
    def ppl(self) -> float:
        return math.exp(min(self.loss, 50))

    def __str__(self) -> str:
        return f"val loss {self.loss:.3f} | ppl {self.ppl:.2f} | BLEU {self.bleu:.2f}"


class Validator:
    """Scores the model on the first `trainer.val_max_sentences` pairs of the val split (all when 0).

    Runs on one process and uses no collectives, so the other processes never wait inside one for it.
    """

    def __init__(
        self,
        model: Seq2SeqModel,
        tokenizer: Tokenizer,
        val: datasets.Dataset,
        trainer: TrainerConfig,
        decoding: DecodingConfig,
    ):
        """`trainer` gives the batch size, precision, sentences, images and progress bar; `decoding` the search."""
        self.model, self.tokenizer = model, tokenizer
        self.batch_tokens, self.precision = trainer.batch_tokens, trainer.precision
        self.attention_images, self.progress = trainer.attention_images, trainer.progress
        n = trainer.val_max_sentences or len(val)
        self.src, self.ref = list(val["src"])[:n], list(val["tgt"])[:n]
        prefix = tokenizer.tag_prefix(decoding.tag)  # validating "as" a tagged corpus: its tag starts each source
        self.src_ids = [prefix + ids for ids in list(val["src_ids"])[:n]]
        self.tgt_ids = list(val["tgt_ids"])[:n]
        self.decoding = decoding

    @torch.no_grad()
    def loss(self) -> float:
        """Cross-entropy per target token (no label smoothing)."""
        self.model.eval()
        device = next(self.model.parameters()).device
        lengths = np.array([[len(s) + 1, len(t) + 1] for s, t in zip(self.src_ids, self.tgt_ids)])
        total, tokens = 0.0, 0
        for idx in token_batches(lengths, self.batch_tokens, rng=None):
            batch = collate([self.src_ids[i] for i in idx], [self.tgt_ids[i] for i in idx]).to(device)
            with autocast(device, self.precision):
                total += loss_sum(self.model, batch, 0.0).item()
            tokens += batch.n_tokens
        return total / tokens

    def translator(self) -> Translator:
        """A translator on a fresh inference copy of the model: training changed its weights in place since the
        last one."""
        return Translator(self.model, self.tokenizer, self.decoding)

    def __call__(self, writer: SummaryWriter, step: int) -> Scores:
        """Score the model; writes val/loss, val/ppl, val/bleu and the attention images at `step`."""
        scores = Scores(self.loss(), 0.0)
        translator = self.translator()
        hyps = translator.translate(self.src, progress=self.progress)
        scores.bleu = sacrebleu.corpus_bleu(hyps, [self.ref]).score
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
