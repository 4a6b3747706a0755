"""Training curves from runs' TensorBoard events: train loss, val loss and val BLEU, by step or by minutes."""

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from transformer.core.files import atomic_write  # noqa: E402
from transformer.runs.run_folder import RunFolder  # noqa: E402

PANELS = [("train/loss", "train loss (label-smoothed)"), ("val/loss", "val loss"), ("val/bleu", "val BLEU")]


def read_scalars(run_dir: Path) -> dict[str, list]:
    events = EventAccumulator(str(RunFolder(run_dir).tensorboard), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: events.Scalars(tag) for tag in events.Tags()["scalars"]}


def training_minutes(points: list, scalars: dict[str, list]) -> list[float]:
    """Minutes of training at each point: the run's own clock (train/minutes, which a resume carries on),
    interpolated at the points' steps; wall time since the first event for runs logged before that clock."""
    clock = scalars.get("train/minutes")
    if clock:
        return list(np.interp([p.step for p in points], [c.step for c in clock], [c.value for c in clock]))
    start = min((s[0].wall_time for s in scalars.values() if s), default=0.0)
    return [(p.wall_time - start) / 60 for p in points]


def plot(runs: list[Path], output: Path, x_axis: str) -> None:
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 3.6))
    for run in runs:
        scalars = read_scalars(run)
        for ax, (tag, title) in zip(axes, PANELS):
            points = scalars.get(tag, [])
            xs = [p.step for p in points] if x_axis == "step" else training_minutes(points, scalars)
            ax.plot(xs, [p.value for p in points], marker="." if tag.startswith("val") else None, label=run.name)
            ax.set_title(title)
            ax.set_xlabel("step" if x_axis == "step" else "minutes")
            ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    atomic_write(output, lambda tmp: fig.savefig(tmp, dpi=110, format=output.suffix.lstrip(".") or "png"))
    print(f"wrote {output}")
