"""A user's own sysbench Lua script: what it defines, checked when the suite is read.

A script ([sysbench] scripts = { tpcc = "tpcc.lua" }) is run by our wrapper exactly as a stock
one is (mallocsweep.lua), so its figures are recorded the same way. Before anything runs, the
wrapper loads it once in check mode (`sysbench mallocsweep.lua help` with MALLOCSWEEP_CHECK: the
script's top level runs, its own modules are found beside it, no server is needed) and says what
it defines: event() (run: one transaction), a prepare command (its tables and rows: the dataset),
a cleanup command, and the options it declares (what [sysbench] script_options may set). A
script that cannot be loaded, or lacks event() or prepare, is refused at its line.

Its modules are the .lua files of its directory (what `require` finds first): the dataset's cache
key covers them, and a client host gets them all.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from servers.scratch import owned_dir

WRAPPER = Path(__file__).resolve().with_name("mallocsweep.lua")
SYSBENCH = "/usr/bin/sysbench"
_CHECK_TIMEOUT_S = 30


class ScriptError(ValueError):
    """Why a script cannot be a workload (one line)."""


@dataclass(frozen=True)
class ScriptFacts:
    path: str
    event: bool
    prepare: bool
    cleanup: bool
    options: tuple[str, ...]  # the --options it declares (sysbench.cmdline.options)


def modules(path: str | Path) -> list[Path]:
    """The script and the other .lua files of its directory (its own modules), sorted."""
    p = Path(path)
    return sorted({p, *p.parent.glob("*.lua")})


def digest(path: str | Path) -> str:
    """What the script's behaviour depends on, hashed: its directory's .lua files' names and
    contents."""
    h = hashlib.sha256()
    for f in modules(path):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


_facts: dict[tuple[str, int, str], ScriptFacts] = {}


def check(path: str | Path, sysbench: str = SYSBENCH) -> ScriptFacts:
    """What the script at `path` defines (cached per file version); ScriptError when sysbench
    cannot load it or it is not a workload (no event(), no prepare)."""
    p = Path(path)
    key = (str(p), p.stat().st_mtime_ns, digest(p))
    if key not in _facts:
        _facts[key] = _check(p, sysbench)
    facts = _facts[key]
    if not facts.event:
        raise ScriptError(
            f"{p.name} defines no event() function: sysbench runs it for every transaction"
        )
    if not facts.prepare:
        raise ScriptError(
            f"{p.name} has no prepare command (a prepare() function or "
            "sysbench.cmdline.commands.prepare): it must make its own tables"
        )
    return facts


def _check(p: Path, sysbench: str) -> ScriptFacts:
    if shutil.which(sysbench) is None:
        raise ScriptError(f"cannot check {p.name}: {sysbench} is not installed here")
    scratch = owned_dir("ms-sbc-", Path(tempfile.gettempdir()))
    out = scratch / "check.json"
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LC_ALL": "C",
        "HOME": str(scratch),
        "MALLOCSWEEP_SCRIPT": str(p),
        "MALLOCSWEEP_CHECK": str(out),
    }
    try:
        done = subprocess.run(
            [sysbench, str(WRAPPER), "help"],
            env=env,
            cwd=scratch,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=_CHECK_TIMEOUT_S,
        )
        try:
            got = json.loads(out.read_text())
        except (OSError, ValueError):
            said = (done.stdout + done.stderr).decode(errors="replace").splitlines()
            fatal = [ln for ln in said if "FATAL" in ln or "error" in ln.lower()]
            why = (fatal or [ln for ln in said if ln.strip() and "sysbench 1" not in ln] or [""])[0]
            raise ScriptError(
                f"sysbench cannot load {p.name}: {why.removeprefix('FATAL: ').strip()[:200]}"
            ) from None
    except subprocess.TimeoutExpired:
        raise ScriptError(
            f"sysbench did not load {p.name} within {_CHECK_TIMEOUT_S}s (does its top level "
            "connect or wait?)"
        ) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return ScriptFacts(
        path=str(p),
        event=bool(got.get("event")),
        prepare=bool(got.get("prepare")),
        cleanup=bool(got.get("cleanup")),
        options=tuple(str(o) for o in got.get("options") or ()),
    )


def option_text(value) -> str:
    """A script option's value as sysbench's command line takes it (booleans are on/off)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)
