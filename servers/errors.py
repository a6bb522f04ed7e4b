"""Errors a user can act on. The CLI prints them as one line and exits non-zero."""


class ServerError(Exception):
    """A server could not be found, started, verified or stopped. The message names the value."""


class AllocatorError(ServerError):
    """An allocator is unknown, missing, unusable, or was not really the one serving malloc."""
