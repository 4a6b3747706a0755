"""`transformer-train` with SentencePiece training and each process' first validation slowed by `SLOW_SECONDS`
each, for tests/training/test_torchrun.py: a preparation and a validation longer than the collective timeout the test
sets."""

import os
import sys
import time

from transformer.cli import train
from transformer.data import preparation
from transformer.training.validation import Validator


def slowed(function, what: str):
    """`function`, its first call in this process after a line naming `what` and the rank on stderr, and a sleep."""
    calls = []

    def run(*args, **kwargs):
        if not calls:
            print(f"slowed {what} on rank {os.environ.get('RANK', '0')}", file=sys.stderr, flush=True)
            time.sleep(float(os.environ["SLOW_SECONDS"]))
        calls.append(1)
        return function(*args, **kwargs)

    return run


preparation.train_sentencepiece = slowed(preparation.train_sentencepiece, "SentencePiece")
Validator.translations = slowed(Validator.translations, "validation")

if __name__ == "__main__":
    train.main()
