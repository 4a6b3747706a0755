"""What a training run shows while it trains: the progress bar, train scalars and log lines."""

import logging
import time

from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from transformer.core.config import TrainerConfig

log = logging.getLogger(__name__)


class TrainMonitor:
    """The bar, and every `log_every` steps loss, lr, tokens/s and minutes (TensorBoard; a log line too without a
    bar). Used on rank 0; token counts are of all processes.

    The bar fills with the share of the budget used (max_steps or max_minutes, whichever is nearer), so that its
    time left holds for a run limited by the clock as for one limited by steps; the step is in its postfix.
    """

    def __init__(self, writer: SummaryWriter | None, trainer: TrainerConfig, used: float, enabled: bool):
        self.writer, self.log_every = writer, trainer.log_every
        self.bar = tqdm(
            total=100.0,
            initial=round(100 * used, 1),
            desc="training",
            bar_format="{desc}: {percentage:3.0f}% of budget|{bar}| {elapsed}<{remaining}{postfix}",
            dynamic_ncols=True,
            disable=not (trainer.progress and enabled),
        )
        self.tokens, self.tick = 0.0, time.time()  # target tokens since the last log, and when that was

    def count(self, tokens: float) -> None:
        self.tokens += tokens

    def stepped(
        self, step: int, loss: float, lr: float, minutes: float, used: float, alignment: float | None = None
    ) -> None:
        """After optimizer step `step`: the bar to `used` (the share of the budget); log every `log_every` steps
        (`minutes`: the run's clock; `alignment`: guided alignment's loss per target token)."""
        self.bar.update(round(100 * used, 1) - self.bar.n)
        if step % self.log_every:
            return
        rate = self.tokens / (time.time() - self.tick)
        self.bar.set_postfix(step=step, loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:.0f}")
        if self.bar.disable:
            log.info("step %d: loss %.3f, lr %.2e, %.0f tokens/s", step, loss, lr, rate)
        scalars = [("loss", loss), ("lr", lr), ("tokens_per_s", rate), ("minutes", minutes)]
        for name, value in scalars + ([("alignment_loss", alignment)] if alignment is not None else []):
            self.writer.add_scalar(f"train/{name}", value, step)
        self.tokens, self.tick = 0.0, time.time()

    def close(self) -> None:
        self.bar.close()
