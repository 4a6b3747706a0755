"""Training, one job per module: `trainer` (set-up and the loop), `step` (one optimizer step), `loss`, `optim` (Adam
and the schedules), `distributed` (torchrun), `progress` (the resumable counters), `keeper` (checkpoints),
`validation` (val loss, BLEU, attention images), `monitor` (bar, train scalars, log lines). It may import `runs`
and every layer below it."""

from transformer.training.trainer import Trainer

__all__ = ["Trainer"]
