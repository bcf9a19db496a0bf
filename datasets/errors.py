"""The error raised for bad input data, flags or files."""


class InputError(ValueError):
    """Bad input: its message is one line naming the file, line or flag."""
