"""`mallocsweep doctor`: is this machine ready, and did a killed run leave anything behind?"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from suites import thp


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "doctor",
        help="check servers, sysbench, allocators, THP, limits, perf; find leftovers",
        description="Readiness of this machine for mallocsweep, each item with what to do when it "
        "is missing; also reports servers left running by a killed run (by the pid files in run "
        "directories) and a THP setting a killed run left changed.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--runs",
        default="runs",
        metavar="DIR",
        help="where run directories are, to look for leftover servers (default: runs)",
    )
    p.add_argument(
        "--restore-thp",
        action="store_true",
        help="put back the THP setting a killed run left changed",
    )
    p.set_defaults(func=run)


def _sysbench() -> Check:
    exe = shutil.which("sysbench")
    if not exe:
        return Check("sysbench", False, "not found", "apt-get install sysbench (or: make setup)")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    return Check("sysbench", True, f"{out} ({exe})")


def _thp_checks() -> list[Check]:
    cur = thp.current()
    out = [
        Check(
            "THP",
            cur["enabled"] is not None,
            f"enabled={cur['enabled']} defrag={cur['defrag']}; "
            + (
                "writable (modes always/madvise/never available)"
                if thp.writable()
                else "not writable: only 'never' (per server, prctl) and 'system'"
            ),
            "" if thp.writable() else "run as root to study always/madvise",
        )
    ]
    left = thp.leftover()
    if left:
        orig = left.get("original", {})
        out.append(
            Check(
                "THP left changed",
                False,
                f"a run (pid {left.get('pid')}, {left.get('run_dir')}) changed THP from "
                f"enabled={orig.get('enabled')} defrag={orig.get('defrag')} and did not restore it"
                + (" — it still seems to be running" if left.get("runner_alive") else ""),
                "mallocsweep doctor --restore-thp",
            )
        )
    return out


def _mongod() -> Check:
    """MongoDB is optional: only the iibench MongoDB suites need a mongod you supply."""
    from servers.errors import ServerError
    from servers.mongodb import find_mongod

    try:
        b = find_mongod()
    except ServerError as e:
        return Check(
            "mongod (optional)",
            False,
            str(e).splitlines()[0],
            "only for MongoDB suites: put mongod on PATH or set [server] binary",
        )
    builtin = (
        f"; links {b.allocator_builtin} statically: only 'builtin'" if b.allocator_builtin else ""
    )
    return Check("mongod (optional)", True, f"{b.path} {b.version}{builtin}")


def _pid_alive_server(pid: int) -> str | None:
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None
    return comm if comm in ("mariadbd", "mysqld", "mongod", "java") else None


def _leftover_servers(runs: Path) -> list[Check]:
    """Servers whose pid file sits in a run's work area and whose process still runs."""
    out = []
    if not runs.is_dir():
        return out
    for pidfile in runs.glob("*/work/*/*.pid"):
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        comm = _pid_alive_server(pid)
        if comm:
            out.append(
                Check(
                    "leftover server",
                    False,
                    f"{comm} pid {pid} from {pidfile.parent}",
                    f"stop it: kill {pid} (it belongs to a run that was killed)",
                )
            )
    return out


def _ulimits() -> Check:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 512 + 2 * 1536
    ok = hard == resource.RLIM_INFINITY or hard >= need
    return Check(
        "open files (1536 clients)",
        ok,
        f"soft {soft}, hard {hard}; a 1536-client level needs {need}"
        " (mallocsweep raises the soft limit itself)",
        "" if ok else f"ulimit -Hn {need} (as root) or limits.conf",
    )


def checks(runs: Path) -> list[Check]:
    from servers import checks as server_checks

    out: list[Check] = []
    for c in [*server_checks.server_checks(), *server_checks.allocator_checks()]:
        out.append(Check(c.name, c.ok, c.detail, c.fix))
    names = {c.name for c in out}
    if "sysbench" not in names:
        out.append(_sysbench())
    if not any(n.startswith("open files") or "ulimit" in n for n in names):
        out.append(_ulimits())
    out.append(_mongod())
    out.extend(_thp_checks())
    out.extend(_leftover_servers(runs))
    return out


def run(args) -> int:
    if args.restore_thp:
        rec = thp.restore_leftover()
        if rec is None:
            print("nothing to restore: no THP change was left by a run")
        else:
            print(f"THP restored to {rec.get('original')}")
        return 0
    found = checks(Path(args.runs))
    if args.json:
        print(json.dumps([asdict(c) for c in found], indent=2))
    else:
        t = Table(title=f"mallocsweep doctor (uid {os.getuid()})")
        for col in ("check", "", "detail", "what to do"):
            t.add_column(col)
        for c in found:
            t.add_row(
                escape(c.name),
                "[green]ok[/green]" if c.ok else "[red]no[/red]",
                escape(c.detail or ""),
                escape(c.fix or ""),
            )
        Console().print(t)
    return 0
