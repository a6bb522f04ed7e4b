"""Readiness checks behind `mallocsweep doctor`: what is installed and usable, and what to do if not.

Each check compares what a full sweep (up to 1536 clients) needs with what this machine has, and
says the command that fixes it. Checks never change the machine.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from servers.allocators import detect_all, glibc_version
from servers.errors import ServerError
from servers.exec_helper import helper
from servers.mysql_config import MySQLSettings
from servers.mysql_flavor import find_mysql

# Client side: one socket per sysbench thread, plus its own files and Lua state.
CLIENT_FD_MARGIN = 256


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None  # what to do when not ok

    def to_dict(self) -> dict:
        return asdict(self)


def _run(argv: list[str], timeout: float = 20) -> tuple[int, str]:
    try:
        p = subprocess.run(
            argv,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=timeout,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, str(e)
    return p.returncode, (p.stdout + p.stderr).strip()


def server_checks(binary: str | None = None, basedir: str | None = None) -> list[Check]:
    """The MySQL-family server and the tool that initialises its datadir."""
    try:
        b = find_mysql(binary, basedir)
    except ServerError as e:
        return [
            Check(
                "mysql-family server",
                False,
                str(e),
                "apt-get install mariadb-server (or give --server PATH to a mysqld)",
            )
        ]
    checks = [Check("mysql-family server", True, f"{b.path}: {b.flavor} {b.version_string}")]
    checks.append(
        Check(
            "datadir initialisation",
            b.install_tool is not None,
            b.install_tool or f"no mariadb-install-db next to {b.path}",
            None if b.install_tool else "apt-get install mariadb-server",
        )
    )
    return checks


def allocator_checks() -> list[Check]:
    """Every registry allocator: usable here, with its library and package version."""
    out = []
    for a in detect_all():
        label = "core" if a.core else "variant"
        if a.usable:
            what = a.library or (
                "glibc malloc, nothing preloaded" if a.kind == "system" else "the binary's own"
            )
            out.append(
                Check(f"allocator {a.name} ({label})", True, f"{what} {a.version or ''}".strip())
            )
        else:
            fix = (
                f"apt-get install {a.package}"
                if a.package and "install" in (a.why_not or "")
                else a.why_not
            )
            out.append(
                Check(f"allocator {a.name} ({label})", False, a.why_not or "not usable", fix)
            )
    return out


def sysbench_check() -> Check:
    exe = shutil.which("sysbench", path="/usr/local/bin:/usr/bin:/bin")
    if exe is None:
        return Check("sysbench", False, "sysbench not found", "apt-get install sysbench")
    rc, out = _run([exe, "--version"])
    m = re.search(r"sysbench (\d+\.\d+\.\d+)", out)
    if rc != 0 or not m:
        return Check(
            "sysbench",
            False,
            f"{exe} --version printed {out[:80]!r}",
            "apt-get install --reinstall sysbench",
        )
    ok = m.group(1).startswith("1.")
    return Check(
        "sysbench",
        ok,
        f"{exe} {m.group(1)}",
        None if ok else "mallocsweep drives sysbench 1.0.x report hooks; install sysbench 1.0",
    )


def open_files_needed(max_threads: int, server_open_files: int | None = None) -> dict[str, int]:
    """Descriptors the runner's children need for `max_threads` clients: {"server", "clients",
    "limit"}. Both inherit the runner's RLIMIT_NOFILE, so "limit" (the larger) is what it must
    reach. The server's figure is the open_files_limit its my.cnf asks for (connections + table
    cache + InnoDB files; below it MariaDB shrinks max_connections and the table cache itself);
    a caller that knows its suite's settings passes that figure, 0 for a server without one."""
    server = (
        MySQLSettings(max_threads=max_threads).open_files_limit
        if server_open_files is None
        else server_open_files
    )
    clients = max_threads + CLIENT_FD_MARGIN
    return {"server": server, "clients": clients, "limit": max(server, clients)}


def threads_needed(max_threads: int) -> int:
    """Threads of the runner's user at the top level: server threads + client threads + the rest."""
    return 2 * max_threads + 512


def limit_checks(max_threads: int = 1536) -> list[Check]:
    """Open files and processes for `max_threads` clients against a server sized for them."""
    fds = open_files_needed(max_threads)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def show(v: int) -> str:
        return "unlimited" if v == resource.RLIM_INFINITY else str(v)

    hard_ok = hard == resource.RLIM_INFINITY or hard >= fds["limit"]
    out = [
        Check(
            "open files (RLIMIT_NOFILE)",
            hard_ok,
            f"soft {show(soft)}, hard {show(hard)}; for {max_threads} clients the server asks for "
            f"{fds['server']} (its open_files_limit) and the clients need {fds['clients']} "
            "(mallocsweep raises the soft limit up to the hard one itself)",
            None
            if hard_ok
            else f"raise the hard limit: ulimit -Hn {fds['limit']} "
            "(or LimitNOFILE= / limits.conf nofile)",
        )
    ]
    nsoft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    need_threads = threads_needed(max_threads)
    root = os.geteuid() == 0  # the kernel does not apply RLIMIT_NPROC to root
    nproc_ok = root or nsoft == resource.RLIM_INFINITY or nsoft >= need_threads
    out.append(
        Check(
            "processes/threads (RLIMIT_NPROC)",
            nproc_ok,
            f"soft {show(nsoft)}; need about {need_threads} threads"
            + (" (root: not enforced)" if root else ""),
            None if nproc_ok else f"ulimit -u {need_threads} (or limits.conf nproc)",
        )
    )
    threads_max = Path("/proc/sys/kernel/threads-max")
    if threads_max.exists():
        tm = int(threads_max.read_text())
        out.append(
            Check(
                "kernel threads-max",
                tm >= need_threads,
                f"{tm}; need {need_threads}",
                None if tm >= need_threads else f"sysctl -w kernel.threads-max={need_threads * 2}",
            )
        )
    return out


def system_checks(max_threads: int = 1536) -> list[Check]:
    gv = glibc_version()
    return [
        Check(
            "glibc",
            gv is not None,
            f"glibc {gv}" if gv else "not glibc",
            None if gv else "mallocsweep's glibc variants need glibc",
        ),
        sysbench_check(),
        exec_helper_check(),
        *limit_checks(max_threads),
    ]


def exec_helper_check() -> Check:
    """The exec helper every child starts through; built from its shipped source if it must be."""
    try:
        return Check("exec helper", True, helper())
    except ServerError as e:
        return Check("exec helper", False, str(e), "apt-get install gcc, or run make setup")
