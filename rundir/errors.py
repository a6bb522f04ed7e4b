"""The error of the run-directory contract."""


class RunDirError(Exception):
    """A run directory is missing, damaged, from a newer format, or cannot be written as asked.

    The message is one line naming the path (and field or value); the CLI prints it and exits 2.
    """
