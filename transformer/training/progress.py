"""Where a training run stands: its counters, best BLEU, kept checkpoints and clock, saved for resume."""

import time
from dataclasses import dataclass, field


@dataclass
class TrainingProgress:
    """A run's progress; `state_dict()` is the `progress` entry of a resumable checkpoint."""

    step: int = 0  # optimizer steps taken (skipped non-finite steps do not count)
    epoch: int = 0
    position: int = 0  # global batches consumed in this epoch
    best_bleu: float = -1.0
    bad_validations: int = 0  # validations since the last better BLEU
    history: list[list] = field(default_factory=list)  # [step, val BLEU] of the step checkpoints on disk
    seconds_before: float = 0.0  # training time of the run's earlier sessions
    started: float = field(default_factory=time.time)  # when this session's clock started

    def train_seconds(self) -> float:
        """Wall-clock seconds spent training this run, over all its sessions."""
        return self.seconds_before + time.time() - self.started

    def start_clock(self) -> None:
        self.started = time.time()

    def budget_used(self, seconds: float, limits) -> float:
        """The fraction of the budget (`limits.max_steps` or `.max_minutes`, whichever is nearer) used after
        `seconds` of training (a clock agreed by all processes)."""
        by_time = seconds / (60 * limits.max_minutes) if limits.max_minutes > 0 else 0.0
        return min(max(self.step / limits.max_steps, by_time), 1.0)

    def record_validation(self, bleu: float) -> bool:
        """Count a validation's BLEU towards early stopping; True when it is the best so far."""
        is_best = bleu > self.best_bleu
        self.best_bleu = max(bleu, self.best_bleu)
        self.bad_validations = 0 if is_best else self.bad_validations + 1
        return is_best

    def state_dict(self) -> dict:
        return {
            "step": self.step,
            "epoch": self.epoch,
            "position": self.position,
            "best_bleu": self.best_bleu,
            "bad_validations": self.bad_validations,
            "history": self.history,
            "train_seconds": self.train_seconds(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore from `state_dict()`'s output (the same keys as checkpoints before this class)."""
        self.step, self.epoch, self.position = state["step"], state["epoch"], state["position"]
        self.best_bleu, self.bad_validations = state["best_bleu"], state["bad_validations"]
        self.history = [list(h) for h in state["history"]]
        self.seconds_before = state["train_seconds"]
        self.start_clock()
