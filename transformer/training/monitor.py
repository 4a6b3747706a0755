"""What a training run shows while it trains: the progress bar, train scalars and log lines."""

import logging
import time

from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from transformer.config import TrainerConfig

log = logging.getLogger(__name__)


class TrainMonitor:
    """The step bar, and every `log_every` steps loss, lr, tokens/s and minutes (TensorBoard; a log line too
    without a bar). Used on rank 0; token counts are of all processes."""

    def __init__(self, writer: SummaryWriter | None, trainer: TrainerConfig, step: int, enabled: bool):
        self.writer, self.log_every = writer, trainer.log_every
        self.bar = tqdm(
            total=trainer.max_steps,
            initial=step,
            desc="training",
            unit="step",
            dynamic_ncols=True,
            disable=not (trainer.progress and enabled),
        )
        self.tokens, self.tick = 0.0, time.time()  # target tokens since the last log, and when that was

    def count(self, tokens: float) -> None:
        self.tokens += tokens

    def stepped(self, step: int, loss: float, lr: float, minutes: float) -> None:
        """After optimizer step `step`: advance the bar; log every `log_every` steps (`minutes`: the run's clock)."""
        self.bar.update()
        if step % self.log_every:
            return
        rate = self.tokens / (time.time() - self.tick)
        self.bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{rate:.0f}")
        if self.bar.disable:
            log.info("step %d: loss %.3f, lr %.2e, %.0f tokens/s", step, loss, lr, rate)
        for name, value in (("loss", loss), ("lr", lr), ("tokens_per_s", rate), ("minutes", minutes)):
            self.writer.add_scalar(f"train/{name}", value, step)
        self.tokens, self.tick = 0.0, time.time()

    def close(self) -> None:
        self.bar.close()
