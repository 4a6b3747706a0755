"""What the service answers a request it refuses or cannot answer with."""

import re

RETRY_AFTER = {"Retry-After": "1"}  # seconds, on a 503 (busy or timed out)


class RequestError(Exception):
    """A request the service refuses or cannot answer: an HTTP status, a message and headers for the answer."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in `text` (not Unicode text, no UTF-8 for it), or None."""
    match = LONE_SURROGATE.search(text)
    return match.start() if match else None
