"""`mallocsweep`: one subcommand per module in suites/cli/commands/; one place turns errors into exit codes.

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
    from suites.cli import home, stdout_guard
    from suites.cli.commands import (
        allocators,
        compare,
        doctor,
        kit,
        merge,
        report,
        run,
        servers,
        tune,
    )
    from suites.errors import Interrupted, SuiteError
except KeyboardInterrupt:
    # Ctrl-C while the modules load (seconds on a loaded machine; the fault campaign's SIGINT
    # found it): nothing has run yet, so no traceback, the exit code of any interrupt.
    print("mallocsweep: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

COMMANDS = [allocators, doctor, servers, kit, run, merge, report, compare, tune]
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
  mallocsweep tune configs/suites/tune.toml --allocator jemalloc --budget 2h --out tune-je
                                                  the settings to deploy, and their drop-in
  mallocsweep kit build --out kit.tar.zst         one archive for a host with nothing installed
"""


class _Parser(argparse.ArgumentParser):
    """argparse's errors as every other user error: one line, exit code 2 (its own form is the
    whole usage text and then the error)."""

    def error(self, message: str):
        print(f"mallocsweep: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


def _version() -> str:
    from rundir.format import FORMAT_VERSION
    from rundir.records import Tool

    return (
        f"mallocsweep {Tool.installed().version or '(not installed: a source tree)'} "
        f"(run format {FORMAT_VERSION})"
    )


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="mallocsweep",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for mod in COMMANDS:
        mod.add_parser(sub)
    return p


def _bad_argument(argv: list[str]) -> str | None:
    """One line naming the first argument that is empty (`--server ''`, a run directory '' that
    would read as the current directory) or holds a control character (a newline in --out, an
    escape in a path): refused before anything runs."""
    from suites.config.settings import control_character

    for i, arg in enumerate(argv):
        name, value = "argument", arg
        if arg.startswith("--") and "=" in arg:
            name, _, value = arg.partition("=")
        elif i and argv[i - 1].startswith("-") and "=" not in argv[i - 1]:
            name = argv[i - 1]
        bad = control_character(value)
        if bad is not None:
            return f"{name} {value!r}: holds a control character ({bad}); give a plain value"
        if not value.strip():
            return f"{name} {value!r}: an empty value; give one, or leave the option out"
    return None


def _unencodable_is_replaced() -> None:
    """Under a locale that cannot encode what we print (LC_ALL=C without Python's UTF-8 mode: an
    "é" in a suite's description, "×" in a table), a character is replaced on the terminal rather
    than ending the command with UnicodeEncodeError. Our files are UTF-8 whatever the locale
    (rundir.atomic encodes them).

    Under a UTF-8 locale, a path of bytes that are not UTF-8 (a run directory named under another
    locale) reaches our strings as lone surrogates (PEP 383), which a strict UTF-8 stream refuses:
    `report` once ended in an internal error printing such a path. stdout gives those bytes back as
    they were (surrogateescape: the name the shell shows), stderr shows them escaped."""
    for stream, on_utf8 in ((sys.stdout, "surrogateescape"), (sys.stderr, "backslashreplace")):
        enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if enc and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors=on_utf8 if enc == "utf8" else "replace")
            except (ValueError, OSError):
                pass


def _exit_code(code: int, error_said: bool = False) -> int:
    """The command's exit code, unless its output could not be written (stdout_guard.lost): a
    result nobody can read is an error (exit 2), said in one line (not a second line after an
    error already said, nor over an interrupt's code)."""
    try:
        why = stdout_guard.lost()
    except Exception:  # noqa: BLE001 - the exit code must still come out
        why = "unknown error"
    if why is None or error_said or code not in (0, 1, 2, 3):
        return code
    print(
        f"mallocsweep: error: stdout: cannot write the output ({why}); it was lost (exit code "
        f"{code} before that)",
        file=sys.stderr,
    )
    return 2


def main(argv: list[str] | None = None) -> int:
    try:
        _unencodable_is_replaced()
        stdout_guard.install()  # `run ... | head -1` must not change the exit code or the report
        given = list(sys.argv[1:] if argv is None else argv)
        bad = _bad_argument(given)
        if bad:
            print(f"mallocsweep: error: {bad}", file=sys.stderr)
            return 2
        try:
            args = build_parser().parse_args(given)
        except SystemExit as e:  # --help, --version and argparse's errors
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
            return _exit_code(code)
        bad = home.expand_args(args)  # `--out '~/runs'`: the home directory, never a "~" dir
        if bad:
            print(f"mallocsweep: error: {bad}", file=sys.stderr)
            return 2
    except KeyboardInterrupt:
        print("mallocsweep: interrupted", file=sys.stderr)
        return 130
    code, error_said = _dispatch(args)
    return _exit_code(code, error_said=error_said)


def _dispatch(args) -> tuple[int, bool]:
    """The command's exit code, and whether an error line was printed (a later "output lost" line
    would be a second one). Nothing is kept between calls: tests call main() many times in one
    process (a flag kept in the module once hid a forked child's "stdout: cannot write" line)."""
    try:
        return args.func(args), False
    except Interrupted as e:
        try:
            where = (
                f"; run directory {e.run_dir}; finish it with: {e.resume}"
                if getattr(e, "resume", None)
                else ""
            )
            print(
                f"mallocsweep: {e}; servers stopped, system settings restored{where}",
                file=sys.stderr,
            )
        except OSError:  # the terminal went away with the SIGHUP: the exit code still tells
            pass
        return e.exit_code, False
    except USER_ERRORS as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"mallocsweep: error: {msg}", file=sys.stderr)
        return 2, True
    except KeyboardInterrupt:
        print("mallocsweep: interrupted", file=sys.stderr)
        return 130, False
    except OSError as e:
        # What the user's machine refuses (a full disk, a read-only or unreachable place, a name
        # too long) is theirs to fix, not a bug of ours: one line naming the file, exit 2.
        if e.errno not in USER_OS_ERRORS:
            return _internal_error(e), True
        where = f"{e.filename}: " if e.filename else ""
        print(f"mallocsweep: error: {where}{e.strerror}", file=sys.stderr)
        return 2, True
    except Exception as e:  # noqa: BLE001 - a bug of ours: one line, the detail on request
        return _internal_error(e), True


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
