"""The setting read back from the live server, beyond what the runner's proof already demands.

Every cell of an arm is verified by the runner before it is measured (servers/verify.py): the
binding, the preload, and the arm's variables and tunables in /proc/PID/environ, each with our
value. Where the allocator can say what it made of them, that is read back too: jemalloc's
opt.* (what it parsed from MALLOC_CONF), from the allocator-statistics shim in the server
(servers/shims/alloc_stats.c, every phase boundary). A knob the allocator ignored or overrode
fails the trial here; it is never measured as if it had been set.
"""

from __future__ import annotations

import json
from pathlib import Path

from suites.errors import SuiteError


def _cells(run_dir: Path, arm: str) -> list[dict]:
    out = []
    for p in sorted((Path(run_dir) / "cells").glob("*.json")):
        cell = json.loads(p.read_text())["cell"]
        name = (cell.get("allocator") or {}).get("name")  # the cell records the whole allocator
        if name == arm and cell.get("status") == "ok":
            out.append(cell)
    return out


def read_back(run_dir: Path, arm: str, writes: str, setting: dict[str, str]) -> dict:
    """What each ok cell of `arm` showed of the setting: {"environ": [...], "allocator": [...]}
    per cell; SuiteError naming the first knob the live server does not have as set."""
    cells = _cells(run_dir, arm)
    if not cells:
        raise SuiteError(f"{run_dir}: no measured life of {arm}")
    said = []
    for cell in cells:
        ver = cell.get("verification") or {}
        env = ver.get("process_env") or {}
        if ver.get("verdict") != "verified":
            raise SuiteError(f"{cell['id']}: the allocator was not verified")
        entry = {"cell": cell["id"], "environ": {k: v for k, v in env.items() if k != "LD_PRELOAD"}}
        if writes == "MALLOC_CONF":
            readings = (cell.get("alloc_memory") or {}).get("readings") or []
            opt = next(
                (r["detail"]["opt"] for r in readings if (r.get("detail") or {}).get("opt")), None
            )
            if opt is not None:
                for key, text in setting.items():
                    if opt.get(key) != text:
                        raise SuiteError(
                            f"{cell['id']}: the server's jemalloc runs with opt.{key}="
                            f"{opt.get(key)!r}, not {text!r} (MALLOC_CONF did not take)"
                        )
                entry["allocator"] = {k: opt.get(k) for k in setting}
        said.append(entry)
    return {"cells": said}
