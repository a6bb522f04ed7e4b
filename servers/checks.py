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


def open_files_needed(max_threads: int, server_open_files: int) -> dict[str, int]:
    """Descriptors the runner's children need for `max_threads` clients: {"server", "clients",
    "limit"}. Both inherit the runner's RLIMIT_NOFILE, so "limit" (the larger) is what it must
    reach. The server's figure is what its family says it opens for that many clients
    (suites.families.base.ServerNeeds.open_files: a MySQL-family server's open_files_limit, from
    connections + table cache + InnoDB files), 0 for a server without one."""
    server = server_open_files
    clients = max_threads + CLIENT_FD_MARGIN
    return {"server": server, "clients": clients, "limit": max(server, clients)}


def threads_needed(max_threads: int) -> int:
    """Threads of the runner's user at the top level: server threads + client threads + the rest."""
    return 2 * max_threads + 512


def limit_checks(max_threads: int, server_open_files: int) -> list[Check]:
    """Open files and processes for `max_threads` clients against a server sized for them (one
    that opens `server_open_files` descriptors for them)."""
    fds = open_files_needed(max_threads, server_open_files)
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


def system_checks(server_open_files: int, max_threads: int = 1536) -> list[Check]:
    """glibc, the limits for `max_threads` clients against a server that opens
    `server_open_files` descriptors for them (its family's figure), and the machine's rest."""
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
        *limit_checks(max_threads, server_open_files),
    ]


def exec_helper_check() -> Check:
    """The exec helper every child starts through; built from its shipped source if it must be."""
    try:
        return Check("exec helper", True, helper())
    except ServerError as e:
        return Check("exec helper", False, str(e), "apt-get install gcc, or run make setup")
