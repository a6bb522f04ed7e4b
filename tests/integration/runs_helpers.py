"""Helpers for tests that run `mallocsweep run` as a real process and watch what it leaves."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MALLOCSWEEP = [sys.executable, "-m", "suites.cli"]


def start_run(args: list[str], cache: Path, state: Path | None = None) -> subprocess.Popen:
    env = dict(os.environ, MALLOCSWEEP_CACHE=str(cache))
    if state is not None:
        env["MALLOCSWEEP_STATE"] = str(state)
    return subprocess.Popen(
        [*MALLOCSWEEP, "run", *args, "--quiet", "--no-report"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_dir_of(out: Path, timeout_s: float = 120) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        dirs = [d for d in out.iterdir() if (d / "manifest.json").exists()] if out.exists() else []
        if dirs:
            return dirs[0]
        time.sleep(0.2)
    raise AssertionError(f"no run directory appeared under {out}")


def wait_for(pred, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def manifest(run_dir: Path) -> dict:
    for _ in range(20):
        try:
            return json.loads((run_dir / "manifest.json").read_text())
        except (OSError, json.JSONDecodeError):
            time.sleep(0.1)
    raise AssertionError("manifest unreadable")


def results(run_dir: Path) -> list[dict]:
    with (run_dir / "results.csv").open() as f:
        return list(csv.DictReader(f))


def server_pid(run_dir: Path) -> int | None:
    """The pid of a server running for this run (from its pid file in work/)."""
    for pidfile in run_dir.glob("work/*/mysqld.pid"):
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if Path(f"/proc/{pid}").exists():
            return pid
    return None


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes whose command line mentions `text` (e.g. the run directory)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            out.append((int(d.name), cmd[:160]))
    return out


def children_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid:
                out.append(int(d.name))
    return out


def kill_quietly(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
