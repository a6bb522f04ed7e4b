"""Typed collector errors."""


class CollectorError(Exception):
    """A measurement could not be taken; the message says which and why."""


class ProcessGone(CollectorError):
    """The process being measured no longer exists (it exited or was killed)."""

    def __init__(self, pid: int, what: str = ""):
        self.pid = pid
        super().__init__(f"process {pid} is gone" + (f" (while reading {what})" if what else ""))
