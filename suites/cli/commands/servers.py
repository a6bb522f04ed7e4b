"""`mallocsweep servers fetch|list`: server versions from Debian's archives, and what is fetched."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from suites.runner.display import stdout_console


def add_parser(sub) -> None:
    p = sub.add_parser(
        "servers",
        help="fetch MariaDB/MySQL versions from Debian's archives; list what is fetched",
        description="Server versions from Debian's archives (bookworm, trixie, sid), kept under "
        "MALLOCSWEEP_SERVERS (default: the state directory's servers/). A version of this host's "
        "release becomes a basedir on the host's libraries; another release's becomes a minimal "
        "root of that release (debootstrap; needs root) with its allocator packages, run under "
        'chroot. A suite names one with [server] fetched = "SPEC".',
    )
    verbs = p.add_subparsers(dest="servers_command", metavar="ACTION", required=True)
    f = verbs.add_parser(
        "fetch",
        help="fetch SPEC (e.g. mysql-9.7.4, mariadb-11.8.9, mariadb-10.11.18)",
        description="Find which Debian release carries SPEC (FLAVOR-X.Y.Z) and make a runnable "
        "install of it; nothing is done when it is already fetched.",
    )
    f.add_argument("spec", metavar="SPEC", help="FLAVOR-X.Y.Z as Debian's archive has it")
    f.set_defaults(func=run_fetch)
    ls = verbs.add_parser("list", help="what is fetched", description="What is fetched.")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(func=run_list)


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def run_fetch(args) -> int:
    from servers.acquire.fetch import fetch

    err = Console(stderr=True)
    t0 = time.monotonic()
    if err.is_terminal:
        with err.status("starting") as status:
            step = ["starting"]

            def say(msg: str) -> None:
                err.log(escape(msg))
                step[0] = msg
                status.update(escape(msg))

            def detail(line: str) -> None:  # the tool's latest line, under the current step
                status.update(f"{escape(step[0])}\n  [dim]{escape(line)}[/dim]")

            s = fetch(args.spec, say, detail=detail)
    else:

        def say(msg: str) -> None:
            print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

        s = fetch(args.spec, say)
    print(
        f"{s.spec}: {s.flavor} {s.debian_version} from {s.release}, {s.kind} {s.path} "
        f"({_mb(s.size_bytes)}, glibc {s.glibc})"
    )
    return 0


def _check_state_dir(base: Path) -> None:
    """The fetched servers' directory, or the nearest part of its path that exists, must be a
    directory: a file there (MALLOCSWEEP_STATE or MALLOCSWEEP_SERVERS pointing at one) is a user
    error, never an empty list."""
    from servers.errors import ServerError

    for p in (base, *base.parents):
        if not p.exists() and not p.is_symlink():
            continue
        if p.is_dir():
            return
        which = (
            "MALLOCSWEEP_SERVERS"
            if os.environ.get("MALLOCSWEEP_SERVERS")
            else (
                "MALLOCSWEEP_STATE"
                if os.environ.get("MALLOCSWEEP_STATE")
                else "the state directory"
            )
        )
        what = "a broken symbolic link" if p.is_symlink() and not p.exists() else "not a directory"
        raise ServerError(
            f"{p}: {what}; the fetched servers are kept in {base} ({which}): point it at a "
            "directory"
        )


def run_list(args) -> int:
    from servers.acquire.fetch import list_damaged, list_fetched, repair_command, servers_dir

    _check_state_dir(servers_dir())
    found = list_fetched()
    damaged = list_damaged()
    if args.json:
        listed = [s.to_json() for s in found] + [
            {"spec": spec, "path": str(d), "damaged": why, "repair": repair_command(d)}
            for spec, d, why in damaged
        ]
        print(json.dumps(listed, indent=2))
        return 0
    t = Table(title=f"Fetched servers ({servers_dir()})")
    for col in ("spec", "version", "release", "kind", "glibc", "allocators inside", "size", "path"):
        t.add_column(col, overflow="fold")
    for s in found:
        allocs = ", ".join(f"{a} {v['version']}" for a, v in s.allocators.items()) or (
            "the host's" if s.kind == "basedir" else "none"
        )
        t.add_row(
            s.spec, s.debian_version, s.release, s.kind, s.glibc, allocs, _mb(s.size_bytes), s.path
        )
    for spec, d, why in damaged:
        t.add_row(spec, "", "", "DAMAGED", "", why, "", str(d))
    stdout_console().print(t)
    for spec, d, why in damaged:
        print(f"{spec} is DAMAGED ({why}); repair it: {repair_command(d)}")
    if not found and not damaged:
        print("nothing fetched: mallocsweep servers fetch SPEC (e.g. mysql-9.7.4)")
    return 0
