"""The test suite, in folders that follow the package's layers (tests/core/, tests/data/, ...)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
