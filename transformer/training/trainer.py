"""The training loop: token-count batches, a label-smoothed loss, Adam with warmup and the decay that
`optim.schedule` names (linear to zero over the budget in the recipes, or the paper's inverse square root),
gradient accumulation, data parallelism under torchrun, periodic validation (loss, perplexity, sacreBLEU),
TensorBoard and complete resumable checkpoints."""

import logging
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from omegaconf import DictConfig
from torch.nn.parallel import DistributedDataParallel
from torch.utils.tensorboard import SummaryWriter

from transformer.compute.auto import bf16_pays, resolve
from transformer.compute.hardware import bf16_ratio, native_bf16
from transformer.compute.runtime import pick_device, seed_everything
from transformer.data.batching import Batch, Batches, TrainBatches
from transformer.data.guided_links import prepare_links, read_links
from transformer.data.preparation import PreparedData, prepare
from transformer.models.factory import build_model
from transformer.runs.checkpoint import read_header
from transformer.runs.run_folder import RunFolder
from transformer.training import distributed
from transformer.training.keeper import CheckpointKeeper
from transformer.training.monitor import TrainMonitor
from transformer.training.optim import make_optimizer
from transformer.training.progress import TrainingProgress
from transformer.training.start import Start, check_init_from, plan_start
from transformer.training.step import StepResult, TrainStep
from transformer.training.validation import Validator

log = logging.getLogger(__name__)


def step_batches(
    data: TrainBatches, batches: Batches, epoch: int, position: int, rank: int, world: int, accumulate: int
) -> Iterator[list[Batch]]:
    """This process' micro-batches for each remaining step of the epoch, collated one step ahead in a thread."""
    per_step = world * accumulate

    def load(start: int) -> list[Batch]:
        return [data.collate(idx, epoch) for idx in batches[start + rank * accumulate :][:accumulate]]

    with ThreadPoolExecutor(max_workers=1) as pool:
        upcoming = pool.submit(load, position)
        while position + per_step <= len(batches):
            micro = upcoming.result()
            position += per_step
            if position + per_step <= len(batches):
                upcoming = pool.submit(load, position)
            yield micro


def join(tcfg: DictConfig, device: torch.device, data: PreparedData, start: Start) -> tuple[int, int]:
    """Join the process group (under torchrun), check that every process prepared the same data and starts alike,
    then set threads and seeds; returns (rank, world)."""
    rank, world = distributed.init(device, tcfg.collective_timeout_minutes)
    models = data.tokenizer.src_model + b"\0" + data.tokenizer.tgt_model
    begins = "resume" if start.resume else "init_from" if start.init else "new"
    distributed.check_same({"prepared data": data.dir.name, "SentencePiece models": models, "start": begins})
    if tcfg.num_threads > 0:
        torch.set_num_threads(tcfg.num_threads)
    seed_everything(tcfg.seed)
    return rank, world


def prepared_data(cfg: DictConfig, start: Start) -> PreparedData:
    """The run's prepared corpus, before the process group starts: the first process to take the prepared folder's
    lock prepares it, the others of its node wait on that lock (no collective, no timeout) and then reuse it; a node
    without a shared `data.prepared_dir` prepares its own copy, under the same name. A run that starts from a
    checkpoint tokenizes with its SentencePiece model(s), so the vocabularies match."""
    tokenizer = read_header(str(start.checkpoint))[2] if start.checkpoint else None
    return prepare(cfg.data, tokenizer)


def training_batches(cfg: DictConfig, data: PreparedData) -> TrainBatches:
    """The training split as token-count batches over the corpus mixture (with BPE-dropout if set, with each
    pair's word alignments for guided alignment)."""
    sampling = (data.tokenizer, cfg.data.subword_dropout) if cfg.data.subword_dropout > 0 else None
    train = data.split(cfg.data.train_split)
    links = None
    if cfg.trainer.guided_alignment.weight > 0:
        folder = prepare_links(data, cfg.data.word_alignment, cfg.data.word_alignment_chunk)
        links = read_links(folder, len(train))
    return TrainBatches.from_dataset(
        train, cfg.data.max_len, cfg.trainer.batch_tokens, cfg.trainer.seed, sampling, data.mixture(cfg.data), links
    )


def log_setup(model: torch.nn.Module, pairs: int, precision: str, device: torch.device, world: int) -> None:
    """One line on the model, the data and where it runs; a warning where bf16 is emulated or slower than fp32."""
    resolved = resolve(precision, "training", device.type)
    if resolved == "bf16" and not native_bf16(device.type):
        log.warning(
            "this %s has no native bf16: it runs emulated, several times slower than fp32; use "
            "trainer.precision=auto (fp32 here)",
            device.type,
        )
    elif resolved == "bf16" and not bf16_pays(device.type):
        log.warning(
            "bf16 products take %.2fx fp32's time on this CPU: training is faster with trainer.precision=auto "
            "(fp32 here)",
            bf16_ratio(),
        )
    auto = " (auto)" if precision == "auto" else ""
    if auto and resolved == "fp32" and native_bf16(device.type):  # a native CPU whose bf16 is slower
        auto = f" (auto: bf16 products take {bf16_ratio():.2f}x fp32's time on this CPU)"
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    where = f"{device} on {world} process(es), {resolved}{auto}"
    log.info("model: %.1fM parameters; %d training pairs; %s", n_params, pairs, where)


def announce_epoch(data: TrainBatches, batches: Batches, epoch: int, writer: SummaryWriter, step: int) -> None:
    """The epoch's batches, padding and pairs of each corpus to the log; the pairs to TensorBoard too."""
    padding = 100 * batches.padding_fraction()
    sampled = " before BPE-dropout" if data.sampling else ""
    pairs = data.pairs_per_corpus(batches)
    shown = ", ".join(f"{name} {n:,}" for name, n in pairs.items())
    log.info("epoch %d: %d batches; padding %.1f%%%s; pairs %s", epoch, len(batches), padding, sampled, shown)
    for name, n in pairs.items():
        writer.add_scalar(f"pairs_per_epoch/{name}", n, step)


def start_process(cfg: DictConfig, run_dir: Path) -> tuple[torch.device, Start, PreparedData, int, int]:
    """This process' device, how the run starts, its prepared data (before any process group, so no collective
    waits on it), then its place in the group: (device, start, data, rank, world)."""
    device = pick_device(cfg.trainer.device)
    if device.type == "cuda":
        torch.cuda.set_device(distributed.local_rank())
    start = plan_start(run_dir, cfg.trainer)
    if start.init is not None:
        check_init_from(cfg)
    data = prepared_data(cfg, start)
    return (device, start, data, *join(cfg.trainer, device, data, start))


class Trainer:
    """One process of a training run: builds its parts, then `fit()` trains.

    Each step makes one collective call of its own (`_reduce`). Every process validates its share of the val
    sentences at the same steps (`Validator`), so none waits in a collective while another validates alone; saving
    and logging run on rank 0 only and make none.
    """

    def __init__(self, cfg: DictConfig, run_dir: Path):
        self.cfg, tcfg = cfg, cfg.trainer
        self.device, start, data, self.rank, self.world = start_process(cfg, run_dir)
        self.main = self.rank == 0
        self.tokenizer, self.train_data = data.tokenizer, training_batches(cfg, data)
        self.model = build_model(cfg.model, self.tokenizer).to(self.device)
        self.optimizer = make_optimizer(self.model, cfg.optim)
        train_model = DistributedDataParallel(self.model) if self.world > 1 else self.model
        self.stepper = TrainStep(
            self.model, train_model, self.optimizer, optim=cfg.optim, trainer=tcfg, world=self.world
        )
        self.keeper = CheckpointKeeper(
            RunFolder(run_dir), self.model, self.tokenizer, cfg, keep_last=tcfg.keep_last, keep_best=tcfg.keep_best
        )
        self.progress, self.stop_requested, self.last_validated = TrainingProgress(), False, 0
        if start.resume is not None:
            self.keeper.restore(start.resume, self.progress, self.optimizer, self.stepper.scaler)
        elif start.init is not None:
            self.keeper.initialise(start.init)
        val = data.split(cfg.data.val_split)
        self.validator = Validator(self.model, self.tokenizer, val, tcfg, cfg.decoding, self.rank, self.world)
        # on resume, hide what an earlier session logged after its checkpoint (later steps) from TensorBoard
        purge = self.progress.step + 1 if self.progress.step else None
        self.writer = SummaryWriter(str(RunFolder(run_dir).tensorboard), purge_step=purge) if self.main else None
        log_setup(self.model, len(self.train_data), tcfg.precision, self.device, self.world)

    def fit(self) -> None:
        """Train until max_steps, max_epochs, max_minutes, early stopping or a signal; validate every `val_every`."""
        handlers = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        limits, progress = self.cfg.trainer, self.progress
        self.progress.start_clock()
        used = progress.budget_used(progress.train_seconds(), limits)
        self.monitor = TrainMonitor(self.writer, limits, used, self.main)
        self.last_validated = progress.step
        try:
            stopped = progress.step >= limits.max_steps
            while progress.epoch < limits.max_epochs and not stopped:
                stopped = self._epoch()
                if not stopped:
                    progress.epoch, progress.position = progress.epoch + 1, 0
        finally:
            self.monitor.close()
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        self._finish()
        distributed.shutdown()

    def _epoch(self) -> bool:
        """The remaining steps of the current epoch; True when the run stops within it."""
        progress, limits = self.progress, self.cfg.trainer
        batches = self.train_data.epoch(progress.epoch)
        if progress.position == 0 and self.main:
            announce_epoch(self.train_data, batches, progress.epoch, self.writer, progress.step)
        steps = step_batches(
            self.train_data, batches, progress.epoch, progress.position, self.rank, self.world, limits.accumulate
        )
        for micro in steps:
            result = self.train_step(micro)
            if result is None:
                return True
            self._after_step(result)
            if progress.step >= limits.max_steps:
                return True
        return False

    def train_step(self, micro: list[Batch]) -> StepResult | None:
        """The step's collective, then the step over this process' `micro`-batches; None (no step) on a stop."""
        tokens, stop, seconds = self._reduce(micro)
        if stop:
            return None
        limits = self.cfg.trainer
        result = self.stepper(micro, tokens, self.progress.step, self.progress.budget_used(seconds, limits))
        self.progress.position += self.world * limits.accumulate
        self.progress.step += result.applied
        return result

    def _reduce(self, micro: list[Batch]) -> tuple[float, bool, float]:
        """The one all-reduce of a step: (target tokens of all processes, any stop request, mean clock seconds).

        It comes before the forward pass, so the token total can normalise the loss before backward, and a
        stop request (signal, time limit, or rank 0's early stopping at the last validation) stops every
        process before the same step.
        """
        limits = self.cfg.trainer
        seconds = self.progress.train_seconds()
        over_time = limits.max_minutes > 0 and seconds >= 60 * limits.max_minutes
        local = [float(sum(b.n_tokens for b in micro)), float(self.stop_requested or over_time), seconds]
        tokens, stops, seconds = distributed.all_sum(local, self.device)
        return tokens, stops > 0, seconds / self.world

    def _after_step(self, result: StepResult) -> None:
        """After a step: rank 0's bar and train scalars; every `val_every` steps a validation (every process) and
        rank 0's resumable checkpoint."""
        if self.main:
            self._show(result)
        step = self.progress.step
        if step % self.cfg.trainer.val_every == 0 and step != self.last_validated:
            self.validate()
            if self.main:
                self.keeper.save_last(self.progress, self.optimizer, self.stepper.scaler)

    def _show(self, result: StepResult) -> None:
        """The bar and train scalars (rank 0)."""
        self.monitor.count(result.tokens)
        if not result.applied:
            return
        step, lr, seconds = self.progress.step, self.optimizer.param_groups[0]["lr"], self.progress.train_seconds()
        used = self.progress.budget_used(seconds, self.cfg.trainer)
        self.monitor.stepped(step, result.loss, lr, seconds / 60, used, result.alignment)

    def validate(self) -> None:
        """Val loss, perplexity and BLEU, every process scoring its share; rank 0 logs them to the log and
        TensorBoard, saves and prunes checkpoints and decides on early stopping."""
        start, progress = time.time(), self.progress
        scores = self.validator(self.writer, progress.step)
        self.last_validated = progress.step
        if not self.main:
            return
        is_best = progress.record_validation(scores.bleu)
        self.keeper.save_validated(progress, scores.bleu, is_best)
        best, seconds = " (best)" if is_best else "", time.time() - start
        log.info("step %d | epoch %d | %s%s | %.0fs", progress.step, progress.epoch, scores, best, seconds)
        patience = self.cfg.trainer.patience
        if patience and progress.bad_validations >= patience:
            log.info("no better val BLEU for %d validations: stopping early", progress.bad_validations)
            self.stop_requested = True  # reaches the other processes through the next step's reduce

    def _finish(self) -> None:
        """At the end: a last validation if this step had none; rank 0's resumable `last` and summary line."""
        progress = self.progress
        if progress.step != self.last_validated:
            self.validate()
        if not self.main:
            return
        self.keeper.save_last(progress, self.optimizer, self.stepper.scaler)
        self.writer.close()
        summary = (progress.step, progress.epoch, progress.train_seconds() / 60, progress.best_bleu)
        log.info("stopped after %d steps (epoch %d), %.1f minutes; best val BLEU %.2f", *summary)

    def _request_stop(self, signum, frame) -> None:
        log.warning("received %s: saving a resumable checkpoint and stopping", signal.Signals(signum).name)
        self.stop_requested = True
