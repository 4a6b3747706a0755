"""The training loop: token-count batches, label-smoothed loss, Adam with inverse-sqrt
warmup, gradient accumulation, data parallelism under torchrun, periodic validation
(loss, perplexity, sacreBLEU), TensorBoard, complete resumable checkpoints."""

import contextlib
import logging
import math
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import sacrebleu
import torch
from omegaconf import DictConfig
from torch.nn.parallel import DistributedDataParallel
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from transformer import distributed
from transformer.batching import Batch, TrainBatches, collate, padding_fraction, token_batches
from transformer.checkpoint import (
    build_model,
    load_checkpoint,
    prune_steps,
    resolve_checkpoint,
    save_checkpoint,
    step_path,
)
from transformer.data import PreparedData, prepare
from transformer.errors import UserError
from transformer.optim import loss_sum, lr_multiplier, make_optimizer, set_lr
from transformer.plotting import attention_figure
from transformer.runtime import autocast, pick_device, seed_everything
from transformer.state import load_optimizer_state, optimizer_state, rng_state, set_rng_state
from transformer.translator import Translator

log = logging.getLogger(__name__)


class Trainer:
    """Owns the model, optimizer, data and run directory of one training run (one process of it)."""

    def __init__(self, cfg: DictConfig, run_dir: Path):
        self.cfg, self.run_dir, self.ckpt_dir = cfg, run_dir, run_dir / "checkpoints"
        tcfg = cfg.trainer
        self.device = pick_device(tcfg.device)
        if self.device.type == "cuda":
            torch.cuda.set_device(distributed.local_rank())
        self.rank, self.world = distributed.init(self.device)
        self.main = self.rank == 0
        if tcfg.num_threads > 0:
            torch.set_num_threads(tcfg.num_threads)
        seed_everything(tcfg.seed)
        resume_from = self._resume_file(tcfg.resume) if tcfg.resume else None
        self.data = self._prepare(cfg)
        self.tokenizer = self.data.tokenizer
        sampling = (self.tokenizer, cfg.data.subword_dropout) if cfg.data.subword_dropout > 0 else None
        self.train_data = TrainBatches.from_dataset(
            self.data.split(cfg.data.train_split), cfg.data.max_len, tcfg.batch_tokens, tcfg.seed, sampling
        )
        val = self.data.split(cfg.data.val_split)
        n_val = tcfg.val_max_sentences or len(val)
        self.val_src, self.val_ref = list(val["src"])[:n_val], list(val["tgt"])[:n_val]
        self.val_ids = (list(val["src_ids"]), list(val["tgt_ids"]))
        self.model = build_model(cfg.model, self.tokenizer).to(self.device)
        self.optimizer = make_optimizer(self.model, cfg.optim)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=tcfg.precision == "fp16")
        self.translator = Translator(self.model, self.tokenizer, cfg.decoding)
        self.step, self.epoch, self.position = 0, 0, 0  # position: global batches consumed in this epoch
        self.best_bleu, self.bad_validations, self.nonfinite, self.history = -1.0, 0, 0, []
        self.seconds_before, self.started = 0.0, time.time()  # training time of earlier sessions, this start
        self.stop_requested = False
        if resume_from is not None:
            self._resume(resume_from)
        self.train_model = self.model
        if self.world > 1:
            self.train_model = DistributedDataParallel(self.model)
        if tcfg.compile:
            self.train_model = torch.compile(self.train_model)
        # on resume, hide what an earlier session logged after its checkpoint (steps > self.step) from TensorBoard
        purge = self.step + 1 if self.step else None
        self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=purge) if self.main else None
        n_params = sum(p.numel() for p in self.model.parameters())
        log.info(
            "model: %.1fM parameters; %d training pairs; %s on %d process(es), %s",
            n_params / 1e6,
            len(self.train_data),
            self.device,
            self.world,
            tcfg.precision,
        )

    def _prepare(self, cfg: DictConfig) -> PreparedData:
        """Rank 0 prepares the data; the others wait for it, then reuse the same directory."""
        data = prepare(cfg.data) if self.main else None
        if self.world > 1:
            torch.distributed.barrier()
        return data or prepare(cfg.data)

    # ----- checkpoints -------------------------------------------------------------------------

    def training_state(self) -> dict:
        return {
            "optimizer": optimizer_state(self.optimizer),
            "scaler": self.scaler.state_dict(),
            "progress": {
                "step": self.step,
                "epoch": self.epoch,
                "position": self.position,
                "best_bleu": self.best_bleu,
                "bad_validations": self.bad_validations,
                "history": self.history,
                "train_seconds": self.train_seconds(),
            },
            "rng": rng_state(),
        }

    def save(self, path: Path, bleu: float | None, resumable: bool = False) -> None:
        save_checkpoint(
            path,
            self.model,
            self.tokenizer,
            self.cfg,
            self.training_state() if resumable else None,
            step=self.step,
            epoch=self.epoch,
            val_bleu="" if bleu is None else f"{bleu:.2f}",
            train_minutes=f"{self.train_seconds() / 60:.1f}",
        )

    def _resume_file(self, resume: str) -> Path:
        """The checkpoint `trainer.resume` names: this run's last one ("true"), a run directory's, or a file."""
        source = self.run_dir if resume.lower() == "true" else Path(resume)
        file = source / "checkpoints" / "last.safetensors" if source.is_dir() else resolve_checkpoint(str(source))
        if not file.exists():
            raise UserError(f"nothing to resume: {file} does not exist (train without trainer.resume first)")
        return file

    def _resume(self, file: Path) -> None:
        ckpt = load_checkpoint(str(file), self.device)
        if ckpt.state is None:
            raise UserError(f"{file} holds weights only; resume from a run's checkpoints/last.safetensors")
        self.model.load_state_dict(ckpt.model.state_dict())
        state = ckpt.state
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        progress = state["progress"]
        self.step, self.epoch, self.position = progress["step"], progress["epoch"], progress["position"]
        self.best_bleu, self.bad_validations = progress["best_bleu"], progress["bad_validations"]
        self.history = progress["history"]
        self.seconds_before = progress["train_seconds"]
        set_rng_state(state["rng"])
        log.info("resumed from %s at step %d (epoch %d, batch %d)", file, self.step, self.epoch, self.position)

    # ----- training ----------------------------------------------------------------------------

    def train_step(self, batches: list[Batch]) -> float:
        """One optimizer step over this process' micro-batches; returns the loss per target token."""
        self.train_model.train()
        local_tokens = sum(b.n_tokens for b in batches)
        total_tokens = distributed.all_sum(local_tokens, self.device)  # over micro-batches and processes
        self.optimizer.zero_grad(set_to_none=True)
        loss_total = 0.0
        for i, batch in enumerate(batches):
            batch = batch.to(self.device)
            sync = i == len(batches) - 1 or self.world == 1
            context = contextlib.nullcontext() if sync else self.train_model.no_sync()
            with context, autocast(self.device, self.cfg.trainer.precision):
                loss = loss_sum(self.train_model, batch, self.cfg.optim.label_smoothing)
            # DDP averages gradients over processes; scaling by world size makes that a sum over all tokens.
            self.scaler.scale(loss * self.world / total_tokens).backward()
            loss_total += loss.item()
        self.scaler.unscale_(self.optimizer)
        clip = self.cfg.optim.clip_norm if self.cfg.optim.clip_norm > 0 else float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        if not torch.isfinite(norm) and not self.scaler.is_enabled():
            self.nonfinite += 1
            log.warning(
                "step %d: non-finite gradient (norm %s); step skipped (%d in a row)",
                self.step + 1,
                norm.item(),
                self.nonfinite,
            )
            if self.nonfinite >= self.cfg.trainer.max_nonfinite:
                raise UserError(
                    f"{self.nonfinite} consecutive steps had non-finite gradients; lower optim.lr, "
                    "raise optim.warmup_steps or use trainer.precision=fp32"
                )
            return loss_total / local_tokens
        self.nonfinite = 0
        set_lr(self.optimizer, self.cfg.optim.lr * lr_multiplier(self.cfg.optim, self.step + 1, self.progress()))
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.step += 1
        return loss_total / local_tokens

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

    def validate(self) -> None:
        """Val loss, perplexity and BLEU to the log and TensorBoard; saves and prunes checkpoints."""
        start = time.time()
        loss = self.validation_loss()
        hyps = self.translator.translate(self.val_src, progress=self.cfg.trainer.progress)
        bleu = sacrebleu.corpus_bleu(hyps, [self.val_ref]).score
        for name, value in (("loss", loss), ("ppl", math.exp(min(loss, 50))), ("bleu", bleu)):
            self.writer.add_scalar(f"val/{name}", value, self.step)
        self._attention_images()
        is_best = bleu > self.best_bleu
        self.best_bleu = max(bleu, self.best_bleu)
        self.bad_validations = 0 if is_best else self.bad_validations + 1
        self.save(step_path(self.ckpt_dir, self.step), bleu)
        self.history = prune_steps(
            self.ckpt_dir, [*self.history, [self.step, bleu]], self.cfg.trainer.keep_last, self.cfg.trainer.keep_best
        )
        if is_best:
            self.save(self.ckpt_dir / "best.safetensors", bleu)
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
        if self.cfg.trainer.patience and self.bad_validations >= self.cfg.trainer.patience:
            log.info("no better val BLEU for %d validations: stopping early", self.bad_validations)
            self.stop_requested = True

    def _attention_images(self) -> None:
        """Cross-attention heatmaps of the first few val sentences, to watch alignment emerge."""
        sentences = self.val_src[: self.cfg.trainer.attention_images]
        for i, (src_ids, hyps) in enumerate(self.translator.search(sentences)):
            if hyps:
                fig = attention_figure(self.model, self.tokenizer, src_ids, hyps[0].tokens)
                self.writer.add_figure(f"attention/val_{i}", fig, self.step)

    def _request_stop(self, signum, frame) -> None:
        log.warning("received %s: saving a resumable checkpoint and stopping", signal.Signals(signum).name)
        self.stop_requested = True

    def progress(self) -> float:
        """The fraction of the budget (max_steps or max_minutes, whichever is nearer) used; equal on all ranks."""
        limits = self.cfg.trainer
        by_time = self.train_seconds() / (60 * limits.max_minutes) if limits.max_minutes > 0 else 0.0
        by_time = distributed.all_sum(by_time, self.device) / self.world
        return min(max(self.step / limits.max_steps, by_time), 1.0)

    def _should_stop(self) -> bool:
        limits = self.cfg.trainer
        over_time = limits.max_minutes > 0 and self.train_seconds() >= 60 * limits.max_minutes
        return distributed.any_true(self.stop_requested or over_time, self.device) or self.step >= limits.max_steps

    def train_seconds(self) -> float:
        """Wall-clock seconds spent training this run, over all its sessions."""
        return self.seconds_before + time.time() - self.started

    def _steps(self, batches: list[np.ndarray], epoch: int) -> Iterator[list[Batch]]:
        """This process' micro-batches for each remaining step of the epoch, collated one step ahead."""
        accumulate = self.cfg.trainer.accumulate
        per_step = self.world * accumulate

        def load(position: int) -> list[Batch]:
            mine = batches[position + self.rank * accumulate :][:accumulate]
            return [self.train_data.collate(idx, epoch) for idx in mine]

        with ThreadPoolExecutor(max_workers=1) as pool:
            position = self.position
            upcoming = pool.submit(load, position)
            while position + per_step <= len(batches):
                micro = upcoming.result()
                position += per_step
                if position + per_step <= len(batches):
                    upcoming = pool.submit(load, position)
                yield micro

    def fit(self) -> None:
        """Train until max_steps, max_epochs, max_minutes, early stopping or a signal; validate every `val_every`."""
        limits = self.cfg.trainer
        handlers = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        per_step = self.world * limits.accumulate
        self.started = time.time()
        bar = tqdm(
            total=limits.max_steps,
            initial=self.step,
            desc="training",
            unit="step",
            dynamic_ncols=True,
            disable=not (limits.progress and self.main),
        )
        tokens, tick, last_validated, stopped = 0.0, time.time(), self.step, self._should_stop()
        while self.epoch < limits.max_epochs and not stopped:
            batches = self.train_data.epoch(self.epoch)
            if self.position == 0 and self.main:
                log.info(
                    "epoch %d: %d batches; padding %.1f%%%s",
                    self.epoch,
                    len(batches),
                    100 * padding_fraction(self.train_data.lengths, batches),
                    " before BPE-dropout" if self.train_data.sampling else "",
                )
            for micro in self._steps(batches, self.epoch):
                loss = self.train_step(micro)
                self.position += per_step
                tokens += distributed.all_sum(sum(b.n_tokens for b in micro), self.device)
                bar.update()
                if self.main and self.step % limits.log_every == 0:
                    rate, lr = tokens / (time.time() - tick), self.optimizer.param_groups[0]["lr"]
                    bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:.0f}")
                    if bar.disable:  # without a progress bar, a log line every log_every steps
                        log.info("step %d: loss %.3f, lr %.2e, %.0f tokens/s", self.step, loss, lr, rate)
                    minutes = self.train_seconds() / 60  # the run's clock, carried across resumes
                    for name, value in (("loss", loss), ("lr", lr), ("tokens_per_s", rate), ("minutes", minutes)):
                        self.writer.add_scalar(f"train/{name}", value, self.step)
                    tokens, tick = 0.0, time.time()
                if self.main and self.step % limits.val_every == 0 and self.step != last_validated:
                    self.validate()
                    self.save(self.ckpt_dir / "last.safetensors", self.best_bleu, resumable=True)
                    last_validated = self.step
                stopped = self._should_stop()
                if stopped:
                    break
            if not stopped:
                self.epoch, self.position = self.epoch + 1, 0
        bar.close()
        if self.main:
            if self.step != last_validated:
                self.validate()
            self.save(self.ckpt_dir / "last.safetensors", self.best_bleu, resumable=True)
            self.writer.close()
            log.info(
                "stopped after %d steps (epoch %d), %.1f minutes; best val BLEU %.2f",
                self.step,
                self.epoch,
                self.train_seconds() / 60,
                self.best_bleu,
            )
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        distributed.shutdown()
