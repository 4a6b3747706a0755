"""What the four console scripts share: the config location and one-line user errors."""

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from transformer.config import register_configs
from transformer.errors import UserError

CONFIG_PATH = str(Path(__file__).resolve().parent.parent / "configs")

register_configs()


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn a `UserError` into one line on stderr and exit status 2."""
    try:
        yield
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
