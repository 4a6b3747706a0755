"""Errors caused by the user's input, reported as one line instead of a traceback."""


class UserError(Exception):
    """Something the user can fix (a file, a path, a setting); the message says what."""
