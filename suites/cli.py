"""`mallocsweep`: one subcommand per module in suites/commands/; one place turns errors into exit codes.

Exit codes: 0 success; 1 `compare` found a significant regression; 2 a user error (bad suite file,
option, path, missing component) printed as one line; 3 `run` finished but some cells failed;
4 an internal error (a bug: rerun with MALLOCSWEEP_DEBUG=1 for the traceback);
130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP (servers stopped, THP restored, run resumable).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import traceback
from pathlib import Path

try:
    from analysis.errors import AnalysisError
    from collectors.errors import CollectorError
    from rundir.errors import RunDirError
    from servers.errors import ServerError
    from suites import stdout_guard
    from suites.commands import allocators, compare, doctor, merge, report, run, servers
    from suites.errors import Interrupted, SuiteError
except KeyboardInterrupt:
    # Ctrl-C while the modules load (seconds on a loaded machine; the fault campaign's SIGINT
    # found it): nothing has run yet, so no traceback, the exit code of any interrupt.
    print("mallocsweep: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

COMMANDS = [allocators, doctor, servers, run, merge, report, compare]
USER_ERRORS = (SuiteError, ServerError, CollectorError, AnalysisError, RunDirError)
USER_OS_ERRORS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EROFS,
    errno.ENAMETOOLONG,
    errno.EACCES,
    errno.ENOTDIR,
}

DESCRIPTION = """\
Which memory allocator should this database server run with, on this machine, for this workload?
mallocsweep starts real servers under each allocator (glibc, jemalloc, tcmalloc, mimalloc, TBB
malloc, or your own .so), proves the allocator is really the one serving malloc, warms the buffer
pool, sweeps client concurrency, and writes a run directory with tables, plots and an HTML report.
"""

EPILOG = """\
typical use:
  mallocsweep doctor                              is everything installed and usable?
  mallocsweep allocators                          which allocators can be tested here
  mallocsweep servers fetch mysql-9.7.4           a server version from Debian's archives
  mallocsweep run configs/suites/quick.toml       the quick sweep (about 10 minutes)
  mallocsweep run configs/suites/quick.toml --allocators glibc,jemalloc --threads 8,64 --duration 10
  mallocsweep report runs/<run>                   (re)write report.html and summary.md
  mallocsweep report runs/<run> --rederive        derive the figures again from the raw records
  mallocsweep compare runs/<old> runs/<new>       exit 1 on a significant regression
  mallocsweep run SUITE --shard 1/2 ...; mallocsweep merge RUN1 RUN2 --out DIR   a fleet
"""


class _Parser(argparse.ArgumentParser):
    """argparse's errors as every other user error: one line, exit code 2 (its own form is the
    whole usage text and then the error)."""

    def error(self, message: str):
        print(f"mallocsweep: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="mallocsweep",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for mod in COMMANDS:
        mod.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        stdout_guard.install()  # `run ... | head -1` must not change the exit code or the report
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:
        print("mallocsweep: interrupted", file=sys.stderr)
        return 130
    try:
        return args.func(args)
    except Interrupted as e:
        try:
            print(f"mallocsweep: {e}; servers stopped, system settings restored", file=sys.stderr)
        except OSError:  # the terminal went away with the SIGHUP: the exit code still tells
            pass
        return e.exit_code
    except USER_ERRORS as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"mallocsweep: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mallocsweep: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        # What the user's machine refuses (a full disk, a read-only or unreachable place, a name
        # too long) is theirs to fix, not a bug of ours: one line naming the file, exit 2.
        if e.errno not in USER_OS_ERRORS:
            return _internal_error(e)
        where = f"{e.filename}: " if e.filename else ""
        print(f"mallocsweep: error: {where}{e.strerror}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a bug of ours: one line, the detail on request
        return _internal_error(e)


def _internal_error(e: Exception) -> int:
    if os.environ.get("MALLOCSWEEP_DEBUG"):
        raise e
    where = traceback.extract_tb(e.__traceback__)[-1]
    print(
        f"mallocsweep: internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
        f"(at {Path(where.filename).name}:{where.lineno}; rerun with MALLOCSWEEP_DEBUG=1 for the "
        "traceback and report it)",
        file=sys.stderr,
    )
    return 4


if __name__ == "__main__":
    sys.exit(main())
