"""Training, one job per module: `trainer` (set-up and the loop), `step` (one optimizer step), `progress`
(the resumable counters), `keeper` (checkpoints), `validation` (val loss, BLEU, attention images),
`monitor` (bar, train scalars, log lines)."""

from transformer.training.trainer import Trainer

__all__ = ["Trainer"]
