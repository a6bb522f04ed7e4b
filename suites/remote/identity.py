"""What a client host's mallocsweep install is: its version and a digest of the sources a remote
level depends on (suites/workloads/level_agent.py answers `--version` with it; the runner's
preflight, suites/remote/clients.py, compares it with its own)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

# The sources whose behaviour a remote level depends on: an install on a client host that differs
# in any of them is refused (same version number or not).
_ROOT = Path(__file__).resolve().parents[2]
_SOURCES = (
    "suites/workloads/client_procs.py",
    "suites/workloads/iibench",
    "suites/workloads/level_agent.py",
    "suites/remote/identity.py",
    "suites/target.py",
    # a target's driver is loaded there by reference: the drivers and the families' iibench
    # backends (suites/families/*/driver.py, iibench_backend.py) and what they import
    "suites/families",
    "suites/workloads/level_result.py",
    "rundir/records.py",  # the level's typed record travels back as JSON
)


def digest() -> str:
    h = hashlib.sha256()
    for name in _SOURCES:
        p = _ROOT / name
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.relative_to(_ROOT).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def identity() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("mallocsweep")
    except PackageNotFoundError:
        v = None
    return {"version": v, "digest": digest(), "python": sys.version.split()[0]}
