"""`mallocsweep`: one subcommand per module in suites/commands/; one place turns errors into exit codes.

Exit codes: 0 success; 1 `compare` found a significant regression; 2 a user error (bad suite file,
option, path, missing component) printed as one line; 3 `run` finished but some cells failed;
4 an internal error (a bug: rerun with MALLOCSWEEP_DEBUG=1 for the traceback);
130/143 interrupted by SIGINT/SIGTERM (servers stopped, THP restored, run resumable).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from analysis.errors import AnalysisError
from collectors.errors import CollectorError
from rundir.errors import RunDirError
from servers.errors import ServerError
from suites.commands import allocators, compare, doctor, merge, report, run, servers
from suites.errors import Interrupted, SuiteError

COMMANDS = [allocators, doctor, servers, run, merge, report, compare]
USER_ERRORS = (SuiteError, ServerError, CollectorError, AnalysisError, RunDirError)

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
  mallocsweep compare runs/<old> runs/<new>       exit 1 on a significant regression
  mallocsweep run SUITE --shard 1/2 ...; mallocsweep merge RUN1 RUN2 --out DIR   a fleet
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except Interrupted as e:
        print(f"mallocsweep: {e}; servers stopped, system settings restored", file=sys.stderr)
        return e.exit_code
    except USER_ERRORS as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"mallocsweep: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mallocsweep: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - a bug of ours: one line, the detail on request
        if os.environ.get("MALLOCSWEEP_DEBUG"):
            raise
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
