"""A training run's folder: where each of its files lies, named here and nowhere else.

RUN/checkpoints/best.safetensors         the best val BLEU so far (weights only)
RUN/checkpoints/last.safetensors         the newest, resumable (optimizer, scaler, progress, RNG states)
RUN/checkpoints/step_0001000.safetensors a validated step, kept by trainer.keep_last/keep_best
RUN/checkpoints/avg_last3.safetensors    transformer-average's default output (avg_best3, avg_all)
RUN/tensorboard/                         the training curves
RUN/.hydra/overrides.yaml                the command line that trained it (Hydra's)
"""

from dataclasses import dataclass
from pathlib import Path

SUFFIX = ".safetensors"
CHECKPOINTS = "checkpoints"
STEP = "step_"


@dataclass(frozen=True)
class RunFolder:
    """The folder `transformer-train` writes a run into (`hydra.run.dir`); its paths, whether or not they exist."""

    path: Path

    @classmethod
    def holding(cls, file: Path) -> "RunFolder | None":
        """The run folder whose checkpoint `file` is, or None for a file elsewhere."""
        return cls(file.parent.parent) if file.parent.name == CHECKPOINTS else None

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def best(self) -> Path:
        return self.checkpoints / f"best{SUFFIX}"

    @property
    def last(self) -> Path:
        return self.checkpoints / f"last{SUFFIX}"

    def step(self, step: int) -> Path:
        """The checkpoint of validated step `step`."""
        return self.checkpoints / f"{STEP}{step:07d}{SUFFIX}"

    def steps(self) -> list[Path]:
        """The step checkpoints on disk, oldest first."""
        return sorted(self.checkpoints.glob(f"{STEP}*{SUFFIX}"))

    def average(self, last: int = 0, best: int = 0) -> Path:
        """Where the mean of the `last` newest, or `best` best, or all step checkpoints goes by default."""
        name = f"avg_last{last}" if last else f"avg_best{best}" if best else "avg_all"
        return self.checkpoints / f"{name}{SUFFIX}"

    def trained(self) -> Path | None:
        """The checkpoint to translate with: the best, else the last; None before the run saved one."""
        return next((file for file in (self.best, self.last) if file.exists()), None)

    def resumable(self) -> Path | None:
        """The last checkpoint, if a launch of this run saved one."""
        return self.last if self.last.exists() else None

    @property
    def tensorboard(self) -> Path:
        return self.path / "tensorboard"

    @property
    def overrides(self) -> Path:
        """Hydra's record of the command line's overrides."""
        return self.path / ".hydra" / "overrides.yaml"
