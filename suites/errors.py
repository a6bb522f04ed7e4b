"""Errors a user can act on while planning or running a suite."""


class SuiteError(Exception):
    """A suite file, option or run directory is wrong; the message names the file, field and value."""


class Interrupted(BaseException):
    """The run was interrupted by a signal; carries the exit code (130 for SIGINT, 143 for SIGTERM).

    A BaseException, like KeyboardInterrupt: the `except Exception` clauses that turn a driver
    error into a failed cell must not swallow Ctrl-C and carry on with the next cell.
    """

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by signal {signum}")
