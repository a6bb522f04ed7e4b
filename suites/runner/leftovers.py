"""Where run directories are, and which of their servers are still running.

A runner killed with SIGKILL cannot clean up: its servers get a parent-death SIGKILL
(servers.launch), but a server started by an older version, or one stuck in the kernel, may stay, and `--resume` must not start a second server on the same
work directory. Every run directory the runner creates is recorded in a small registry beside THP's
pending file (the user's state directory), so `mallocsweep doctor` finds runs written with `--out`
anywhere, not only under ./runs.

A server is "of this run" only when its pid file sits in the run's work area and the live process
with that pid names that work directory on its command line (a pid file outlives its process, and
the pid may belong to something else by now). Never by process name.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from collectors.procfs import ProcFS
from rundir.atomic import atomic_write
from rundir.format import MANIFEST
from rundir.write import WORK_DIR
from suites.runner import thp

REGISTRY_NAME = "runs.txt"
# Rewrite the registry without vanished run directories once it grows past this.
PRUNE_BYTES = 64 * 1024


@dataclass(frozen=True)
class LiveServer:
    pid: int
    comm: str
    pid_file: Path
    ppid: int  # the runner while its run is in progress; else whoever adopted the orphan

    @property
    def work_dir(self) -> Path:
        return self.pid_file.parent


def registry_file() -> Path:
    return thp.pending_file().parent / REGISTRY_NAME


def register(run_dir: Path) -> None:
    """Record a new run directory (append-only; several runners may append at once)."""
    f = registry_file()
    f.parent.mkdir(parents=True, exist_ok=True)
    with open(f, "a") as out:
        out.write(f"{Path(run_dir).absolute()}\n")
    if f.stat().st_size > PRUNE_BYTES:
        atomic_write(f, "".join(f"{p}\n" for p in registered_runs()))


def registered_runs() -> list[Path]:
    """Recorded run directories that still exist, oldest first, without duplicates."""
    try:
        lines = registry_file().read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [Path(p) for p in dict.fromkeys(lines) if p.strip() and Path(p).is_dir()]


def pid_files(run_dir: Path) -> list[Path]:
    """Pid files of the run's servers: mysqld.pid, mongod.pid, ... in work/<cell>/."""
    return sorted((Path(run_dir) / WORK_DIR).glob("*/*.pid"))


def _mentions(cmdline: bytes, directory: Path) -> bool:
    """True when an argument is `directory` or a path inside it (not a sibling like cell10)."""
    names = {str(directory), str(directory.resolve())}
    for arg in cmdline.decode(errors="replace").split("\0"):
        for d in names:
            if re.search(re.escape(d) + r"(/|$)", arg):
                return True
    return False


def process_in(pid: int, directory: Path, proc_root: str = "/proc") -> tuple[str, int] | None:
    """(command name, parent pid) of live process `pid` if its command line names `directory`."""
    base = Path(proc_root) / str(pid)
    try:
        fields = (base / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        cmdline = (base / "cmdline").read_bytes()
        comm = (base / "comm").read_text(encoding="utf-8").strip()
        state, ppid = fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None
    if state == "Z" or not _mentions(cmdline, directory):
        return None
    return comm, ppid


def runner_identity() -> dict:
    """This process as a manifest names its runner: its pid and its start time (clock ticks since
    boot), which tells it from a later process that is given the same pid."""
    pid = os.getpid()
    return {"runner_pid": pid, "runner_start_ticks": ProcFS().stat(pid).starttime_ticks}


def runner_running(manifest: dict) -> int | None:
    """The pid of the runner the manifest names if that very process still runs (not this one).

    Pids are reused: this machine has 32,768, and under test load they wrapped within minutes, so
    a runner killed with SIGKILL may have its pid taken by anything (a thread id counts too) by
    the time --resume looks. Runs that recorded the runner's start time are matched on both; older
    ones on the pid alone, as before."""
    pid = manifest.get("runner_pid")
    if not pid or pid == os.getpid():
        return None
    try:
        pid = int(pid)
    except (ValueError, TypeError):
        return None
    ticks = manifest.get("runner_start_ticks")
    if not ProcFS().alive(pid, start_ticks=ticks):
        return None
    # A run that recorded no start time (before runner_start_ticks): the pid alone may name any
    # later process by now, so it counts only if that process is a mallocsweep runner.
    if ticks is None and not is_runner(pid):
        return None
    return pid


def is_runner(pid: int, proc_root: str = "/proc") -> bool:
    """True when process `pid`'s command line is mallocsweep's (the entry point, or
    `python -m suites.cli.main`) running `run` (a run's runner; report and compare are not)."""
    try:
        args = (Path(proc_root) / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    names = [os.path.basename(a.decode(errors="replace")) for a in args]
    tool = next(
        (i for i, a in enumerate(names) if a == "mallocsweep" or a == "suites.cli.main"), None
    )
    return tool is not None and "run" in names[tool + 1 :]


def settle_killed_runner(manifest: dict) -> None:
    """A manifest that says "running" while the runner it names is gone (SIGKILLed, the machine
    rebooted, its pid now someone else's) is read as what it is: interrupted, with why (the
    notices then give the resume command). Only the dict in memory changes, never the file."""
    if manifest.get("status") != "running" or runner_running(manifest) is not None:
        return
    pid = manifest.get("runner_pid")
    manifest["status"] = "interrupted"
    manifest["interrupted_by"] = (
        f"the loss of its runner (pid {pid} is gone or is another process now: killed, or the "
        "machine restarted)"
        if pid
        else "the loss of its runner (none recorded still runs)"
    )


def runner_pid(run_dir: Path) -> int | None:
    """The pid of the runner that last worked on `run_dir` (from its manifest)."""
    try:
        return int(
            json.loads((Path(run_dir) / MANIFEST).read_text(encoding="utf-8")).get("runner_pid")
        )
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def live_servers(run_dir: Path, proc_root: str = "/proc") -> list[LiveServer]:
    """Servers still running from `run_dir`'s work area (see the module doc for the proof)."""
    out = []
    for pf in pid_files(run_dir):
        try:
            pid = int(pf.read_text(encoding="utf-8").split()[0])
        except (OSError, ValueError, IndexError):
            continue
        found = process_in(pid, pf.parent.absolute(), proc_root)
        if found is not None:
            out.append(LiveServer(pid, found[0], pf, found[1]))
    return out


def known_run_dirs(extra_roots: list[Path] = ()) -> list[Path]:
    """Registered run directories plus those directly under `extra_roots` (older runs)."""
    found = [p.absolute() for p in registered_runs()]
    for root in extra_roots:
        root = Path(root)
        if root.is_dir():
            found += [d.absolute() for d in sorted(root.iterdir()) if (d / WORK_DIR).is_dir()]
    return list(dict.fromkeys(found))
