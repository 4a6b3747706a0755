"""The training loop: batches by tokens, label-smoothed loss, Adam with inverse-sqrt
warmup, periodic validation (loss, perplexity, sacreBLEU), TensorBoard, checkpoints."""

import contextlib
import logging
import math
import random
import time
from pathlib import Path

import numpy as np
import sacrebleu
import torch
import torch.nn.functional as F
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from transformer.batching import Batch, TrainBatches, collate, padding_fraction, token_batches
from transformer.checkpoint import build_model, save_checkpoint
from transformer.config import OptimConfig, TrainConfig
from transformer.data import PreparedData, prepare
from transformer.model import Transformer
from transformer.tokenizer import PAD_ID
from transformer.translator import Translator

log = logging.getLogger(__name__)


def pick_device(name: str) -> torch.device:
    """`auto` means CUDA when available, else CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def inverse_sqrt(step: int, warmup: int) -> float:
    """Learning-rate multiplier: linear warmup to 1 at `warmup`, then (warmup/step)^0.5."""
    step = max(step, 1)
    return min(step / warmup, math.sqrt(warmup / step)) if warmup > 0 else 1.0 / math.sqrt(step)


def make_optimizer(
    model: Transformer, cfg: OptimConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    optimizer = torch.optim.Adam(
        model.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay, foreach=True
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: inverse_sqrt(step, cfg.warmup_steps))
    return optimizer, scheduler


def autocast(device: torch.device, precision: str):
    """The mixed-precision context for `precision` (fp32 = none)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    raise ValueError(f"trainer.precision={precision!r}; choose fp32 or bf16")


def loss_sum(model: Transformer, batch: Batch, label_smoothing: float) -> torch.Tensor:
    """Summed label-smoothed cross-entropy over the batch's non-pad target tokens."""
    logits = model(batch.src, batch.tgt_in)  # (B, T, V)
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        batch.tgt_out.flatten(),
        ignore_index=PAD_ID,
        label_smoothing=label_smoothing,
        reduction="sum",
    )


def load_train_split(data: PreparedData, split: str, max_len: int, cfg: TrainConfig) -> TrainBatches:
    """The training pairs as id lists; pairs longer than `max_len` tokens are dropped and counted."""
    ds = data.split(split)
    src_ids, tgt_ids = ds["src_ids"], ds["tgt_ids"]
    keep = [i for i in range(len(src_ids)) if max(len(src_ids[i]), len(tgt_ids[i])) + 1 <= max_len]
    if len(keep) < len(src_ids):
        log.info(
            "dropped %d of %d training pairs longer than data.max_len=%d tokens",
            len(src_ids) - len(keep),
            len(src_ids),
            max_len,
        )
    return TrainBatches(
        [src_ids[i] for i in keep], [tgt_ids[i] for i in keep], cfg.trainer.batch_tokens, cfg.trainer.seed
    )


class Trainer:
    """Owns the model, optimizer, data and run directory of one training run."""

    def __init__(self, cfg: TrainConfig, run_dir: Path):
        self.cfg, self.run_dir = cfg, run_dir
        self.device = pick_device(cfg.trainer.device)
        if cfg.trainer.num_threads > 0:
            torch.set_num_threads(cfg.trainer.num_threads)
        seed_everything(cfg.trainer.seed)
        self.data = prepare(cfg.data)
        self.tokenizer = self.data.tokenizer
        self.train_data = load_train_split(self.data, cfg.data.train_split, cfg.data.max_len, cfg)
        val = self.data.split(cfg.data.val_split)
        n_val = cfg.trainer.val_max_sentences or len(val)
        self.val_src, self.val_ref = val["src"][:n_val], val["tgt"][:n_val]
        self.val_ids = (val["src_ids"], val["tgt_ids"])
        self.model = build_model(cfg.model, self.tokenizer).to(self.device)
        self.optimizer, self.scheduler = make_optimizer(self.model, cfg.optim)
        self.translator = Translator(self.model, self.tokenizer, cfg.decoding)
        self.writer = SummaryWriter(str(run_dir / "tensorboard"))
        self.step, self.epoch, self.best_bleu = 0, 0, -1.0
        n_params = sum(p.numel() for p in self.model.parameters())
        log.info(
            "model: %.1fM parameters; %d training pairs; device %s, %s",
            n_params / 1e6,
            len(self.train_data.src_ids),
            self.device,
            cfg.trainer.precision,
        )

    def train_step(self, batch: Batch) -> float:
        """One optimizer step on `batch`; returns the loss per target token."""
        self.model.train()
        batch = batch.to(self.device)
        with autocast(self.device, self.cfg.trainer.precision):
            loss = loss_sum(self.model, batch, self.cfg.optim.label_smoothing) / batch.n_tokens
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.optim.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.optim.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return loss.item()

    @torch.no_grad()
    def validation_loss(self) -> float:
        """Cross-entropy per target token on the val split (no label smoothing)."""
        self.model.eval()
        src_ids, tgt_ids = self.val_ids
        lengths = np.array([[len(s) + 1, len(t) + 1] for s, t in zip(src_ids, tgt_ids)])
        total, tokens = 0.0, 0
        for idx in token_batches(lengths, self.cfg.trainer.batch_tokens, rng=None):
            batch = collate([src_ids[i] for i in idx], [tgt_ids[i] for i in idx]).to(self.device)
            with autocast(self.device, self.cfg.trainer.precision):
                total += loss_sum(self.model, batch, 0.0).item()
            tokens += batch.n_tokens
        return total / tokens

    def validate(self) -> float:
        """Val loss, perplexity and BLEU to the log and TensorBoard; saves last/best checkpoints."""
        start = time.time()
        loss = self.validation_loss()
        hyps = self.translator.translate(self.val_src, progress=self.cfg.trainer.progress)
        bleu = sacrebleu.corpus_bleu(hyps, [self.val_ref]).score
        self.writer.add_scalar("val/loss", loss, self.step)
        self.writer.add_scalar("val/ppl", math.exp(min(loss, 50)), self.step)
        self.writer.add_scalar("val/bleu", bleu, self.step)
        is_best = bleu > self.best_bleu
        self.best_bleu = max(bleu, self.best_bleu)
        self.save("last", bleu)
        if is_best:
            self.save("best", bleu)
        log.info(
            "step %d | epoch %d | val loss %.3f | ppl %.2f | BLEU %.2f%s | %.0fs",
            self.step,
            self.epoch,
            loss,
            math.exp(min(loss, 50)),
            bleu,
            " (best)" if is_best else "",
            time.time() - start,
        )
        return bleu

    def save(self, name: str, bleu: float) -> None:
        save_checkpoint(
            self.run_dir / "checkpoints" / f"{name}.safetensors",
            self.model,
            self.tokenizer,
            self.cfg,
            step=self.step,
            epoch=self.epoch,
            val_bleu=f"{bleu:.2f}",
        )

    def out_of_time(self, start: float) -> bool:
        limits = self.cfg.trainer
        minutes = (time.time() - start) / 60
        return self.step >= limits.max_steps or (limits.max_minutes > 0 and minutes >= limits.max_minutes)

    def fit(self) -> None:
        """Train until max_steps, max_epochs or max_minutes, validating every `val_every` steps."""
        limits = self.cfg.trainer
        start = time.time()
        bar = tqdm(
            total=limits.max_steps, desc="training", unit="step", disable=not limits.progress, dynamic_ncols=True
        )
        tokens, tick = 0, time.time()
        while self.epoch < limits.max_epochs and not self.out_of_time(start):
            batches = self.train_data.epoch(self.epoch)
            if self.epoch == 0:
                log.info(
                    "%d batches per epoch; padding %.1f%%",
                    len(batches),
                    100 * padding_fraction(self.train_data.lengths, batches),
                )
            for indices in batches:
                batch = self.train_data.collate(indices)
                loss = self.train_step(batch)
                tokens += batch.n_tokens
                bar.update()
                if self.step % limits.log_every == 0:
                    rate = tokens / (time.time() - tick)
                    lr = self.scheduler.get_last_lr()[0]
                    bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:.0f}")
                    self.writer.add_scalar("train/loss", loss, self.step)
                    self.writer.add_scalar("train/lr", lr, self.step)
                    self.writer.add_scalar("train/tokens_per_s", rate, self.step)
                    tokens, tick = 0, time.time()
                if self.step % limits.val_every == 0:
                    self.validate()
                if self.out_of_time(start):
                    break
            else:
                self.epoch += 1
        bar.close()
        if self.step % limits.val_every != 0:
            self.validate()
        self.writer.close()
        log.info(
            "finished after %d steps, %d epochs, %.1f minutes; best val BLEU %.2f",
            self.step,
            self.epoch,
            (time.time() - start) / 60,
            self.best_bleu,
        )
