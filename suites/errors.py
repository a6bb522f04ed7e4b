"""Errors a user can act on while planning or running a suite."""


class SuiteError(Exception):
    """A suite file, option or run directory is wrong; the message names the file, field and value."""


# Raised by the runner at its safe points (servers.interrupts): one class for servers and suites.
from servers.interrupts import Interrupted  # noqa: E402,F401
