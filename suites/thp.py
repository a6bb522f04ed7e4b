"""Transparent hugepages as a matrix dimension: set for a cell, always restored.

The sysfs setting is system-wide, so the original values are saved *before* the first write — in
the run directory and in a machine-wide pending file that `mallocsweep doctor` reads — and restored
on every exit path the runner has (normal end, failed cell, exception, SIGINT/SIGTERM via the
runner's handlers, atexit). Only a SIGKILL of the runner can leave it changed; doctor then shows the
original values and `mallocsweep doctor --restore-thp` puts them back.

Without write access, `never` is still possible per server: PR_SET_THP_DISABLE, set in the child
before exec and inherited by the server. `always`/`madvise` cannot be forced without root.
"""

from __future__ import annotations

import atexit
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from suites.errors import SuiteError

SYSFS = Path("/sys/kernel/mm/transparent_hugepage")
PENDING_NAME = "thp-original.json"


def _state_dir() -> Path:
    base = os.environ.get("MALLOCSWEEP_STATE") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "mallocsweep"
    )
    return Path(base)


def pending_file() -> Path:
    return _state_dir() / PENDING_NAME


def read_choice(path: Path) -> str | None:
    """The bracketed value of a sysfs choice file ("always [madvise] never" -> "madvise")."""
    try:
        text = path.read_text()
    except OSError:
        return None
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip() or None


def current(sysfs: Path = SYSFS) -> dict[str, str | None]:
    return {"enabled": read_choice(sysfs / "enabled"), "defrag": read_choice(sysfs / "defrag")}


def writable(sysfs: Path = SYSFS) -> bool:
    return os.access(sysfs / "enabled", os.W_OK) and os.access(sysfs / "defrag", os.W_OK)


@dataclass
class Applied:
    requested: str
    method: str  # "none" (system), "sysfs", "prctl"
    thp_disable: bool  # pass to the server launch (PR_SET_THP_DISABLE)
    in_force: dict  # read back after applying

    def to_manifest(self) -> dict:
        return {"requested": self.requested, "method": self.method, "in_force": self.in_force}


class ThpController:
    """Applies a THP mode per cell; restore() puts the original system values back (idempotent)."""

    def __init__(self, run_dir: Path | None, sysfs: Path = SYSFS, defrag: str = "system"):
        self.sysfs = Path(sysfs)
        self.run_dir = Path(run_dir) if run_dir else None
        self.defrag = defrag
        self.original: dict | None = None  # set once we changed something
        atexit.register(self.restore)

    def check(self, modes: list[str]) -> None:
        """Refuse early (before any cell runs) what cannot be done here."""
        if self.sysfs.exists() is False and any(m != "system" for m in modes):
            raise SuiteError(
                f"thp.modes {modes}: {self.sysfs} does not exist; this kernel has no THP"
            )
        if writable(self.sysfs):
            return
        forced = [m for m in modes if m in ("always", "madvise")]
        if forced:
            raise SuiteError(
                f"thp.modes: {forced[0]!r} needs write access to {self.sysfs}/enabled (run as root); "
                "'never' works without it (per server, via PR_SET_THP_DISABLE)"
            )

    def apply(self, mode: str) -> Applied:
        if mode == "system":
            self.restore()
            return Applied(mode, "none", False, current(self.sysfs))
        if not writable(self.sysfs):
            if mode == "never":
                return Applied(mode, "prctl", True, current(self.sysfs))
            raise SuiteError(
                f"thp mode {mode!r} needs write access to {self.sysfs}/enabled (run as root)"
            )
        self._save_original()
        try:
            self._write("enabled", mode)
            if self.defrag != "system":
                self._write("defrag", self.defrag)
        except OSError as e:
            if mode == "never":
                self.restore()
                return Applied(mode, "prctl", True, current(self.sysfs))
            raise SuiteError(f"cannot set THP {mode!r} in {self.sysfs}: {e.strerror}") from None
        in_force = current(self.sysfs)
        if in_force["enabled"] != mode:
            raise SuiteError(
                f"wrote THP {mode!r} to {self.sysfs}/enabled but it reads back {in_force['enabled']!r}"
            )
        return Applied(mode, "sysfs", False, in_force)

    def _write(self, name: str, value: str) -> None:
        (self.sysfs / name).write_text(value)

    def _save_original(self) -> None:
        if self.original is not None:
            return
        self.original = current(self.sysfs)
        record = {
            "original": self.original,
            "pid": os.getpid(),
            "run_dir": str(self.run_dir or ""),
            "sysfs": str(self.sysfs),
        }
        text = json.dumps(record, indent=1) + "\n"
        if self.run_dir is not None:
            (self.run_dir / PENDING_NAME).write_text(text)
        pf = pending_file()
        pf.parent.mkdir(parents=True, exist_ok=True)
        pf.write_text(text)

    def restore(self) -> dict | None:
        """Put the original values back; returns them (None when nothing was changed)."""
        if self.original is None:
            return None
        orig, self.original = self.original, None
        for name in ("enabled", "defrag"):
            if orig.get(name):
                try:
                    self._write(name, orig[name])
                except OSError:
                    pass
        for f in (pending_file(), (self.run_dir / PENDING_NAME) if self.run_dir else None):
            if f is not None:
                try:
                    rec = json.loads(f.read_text())
                    if rec.get("sysfs") == str(self.sysfs):
                        f.unlink()
                except (OSError, ValueError):
                    pass
        return orig


def leftover() -> dict | None:
    """A THP change left by a runner that died (SIGKILL): its record, else None."""
    pf = pending_file()
    try:
        rec = json.loads(pf.read_text())
    except (OSError, ValueError):
        return None
    pid = rec.get("pid")
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, TypeError):
        cmdline = ""
    # A live python process with that pid is taken as the runner still at work (pid reuse by an
    # unrelated python process is possible but only delays the restore: doctor says so).
    rec["runner_alive"] = "python" in cmdline or "mallocsweep" in cmdline
    return rec


def restore_leftover() -> dict | None:
    rec = leftover()
    if rec is None:
        return None
    if rec.get("runner_alive"):
        raise SuiteError(
            f"the run that changed THP (pid {rec['pid']}) is still running; it restores THP itself"
        )
    sysfs = Path(rec.get("sysfs") or SYSFS)
    for name, value in (rec.get("original") or {}).items():
        if value:
            try:
                (sysfs / name).write_text(value)
            except OSError as e:
                raise SuiteError(
                    f"cannot restore THP {name}={value} in {sysfs}: {e.strerror}"
                ) from None
    pending_file().unlink(missing_ok=True)
    run_dir = rec.get("run_dir")
    if run_dir:
        (Path(run_dir) / PENDING_NAME).unlink(missing_ok=True)
    return rec
