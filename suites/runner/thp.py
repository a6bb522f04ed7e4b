"""Transparent hugepages as a matrix dimension: set for a cell, always restored — and checked.

The sysfs setting is system-wide, so the original values are saved *before* the first write — in
the run directory, in the user's state directory, and (for the real sysfs, when we may write it)
in a fixed root-owned file, /run/mallocsweep/thp-pending.json, that `mallocsweep doctor` finds
whichever user or HOME runs it. They are restored on every exit path the runner has (normal end,
failed cell, exception, SIGINT/SIGTERM via the runner's handlers, atexit).

A restore writes each value, reads it back and compares. Only when every value matches are the
pending records deleted; otherwise they stay (doctor shows them, `mallocsweep doctor --restore-thp`
puts them back), the controller keeps the original values so atexit tries again, and the failure
is printed and kept in `restore_error`. SIGINT/SIGTERM are held back while a restore writes, so a
Ctrl-C cannot cut it in half. Only a SIGKILL of the runner can leave THP changed.

Without write access, `never` is still possible per server: PR_SET_THP_DISABLE, set in the child
before exec and inherited by the server. `always`/`madvise` cannot be forced without root.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from collectors.errors import CollectorError
from collectors.procfs import ProcFS
from collectors.thp_sysfs import SYSFS, signals_held, system_modes
from rundir.atomic import atomic_write
from suites.errors import SuiteError

PENDING_NAME = "thp-original.json"
# Root-owned and per machine (tmpfs: gone after a reboot, as is the THP change itself).
SYSTEM_PENDING = Path("/run/mallocsweep/thp-pending.json")
PRCTL_NEVER = "never (prctl)"  # what "in force" means for a server started with PR_SET_THP_DISABLE


def _state_dir() -> Path:
    base = os.environ.get("MALLOCSWEEP_STATE") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "mallocsweep"
    )
    return Path(base)


def pending_file() -> Path:
    return _state_dir() / PENDING_NAME


def _record_files(sysfs: Path, run_dir: Path | None) -> list[Path]:
    """Where the original values of a change to `sysfs` are kept (the first is required)."""
    files = [pending_file()]
    if run_dir is not None:
        files.append(Path(run_dir) / PENDING_NAME)
    if Path(sysfs) == SYSFS:  # a test's fake sysfs never touches the machine-wide record
        files.append(SYSTEM_PENDING)
    return files


def current(sysfs: Path = SYSFS) -> dict[str, str | None]:
    return system_modes(sysfs)


def writable(sysfs: Path = SYSFS) -> bool:
    return os.access(sysfs / "enabled", os.W_OK) and os.access(sysfs / "defrag", os.W_OK)


@dataclass
class Applied:
    requested: str
    method: str  # "none" (system), "sysfs", "prctl"
    thp_disable: bool  # pass to the server launch (PR_SET_THP_DISABLE)
    in_force: dict  # read back after applying (prctl: "never (prctl)", system values beside)
    system: dict = field(default_factory=dict)  # the system-wide values read back

    def to_manifest(self) -> dict:
        d = {"requested": self.requested, "method": self.method, "in_force": self.in_force}
        if self.system:
            d["system"] = self.system
        return d


class ThpController:
    """Applies a THP mode per cell; restore() puts the original system values back (idempotent).

    restore() returns the values it restored (verified by reading them back), or None when nothing
    needed restoring — or when restoring failed: `restore_error` then says what and why, the pending
    records are kept for `mallocsweep doctor`, and a later restore() (atexit) tries again."""

    def __init__(self, run_dir: Path | None, sysfs: Path = SYSFS, defrag: str = "system"):
        self.sysfs = Path(sysfs)
        self.run_dir = Path(run_dir) if run_dir else None
        self.defrag = defrag
        self.original: dict | None = None  # set once we changed something; cleared when restored
        self.restore_error: str | None = None
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
            if self.original is not None and self.restore() is None:
                raise SuiteError(self.restore_error or "THP could not be restored")
            cur = current(self.sysfs)
            return Applied(mode, "none", False, cur, cur)
        if not writable(self.sysfs):
            if mode == "never":
                return self._prctl_never()
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
                # Per server instead: put the system back first, and say so if that fails.
                if self.restore() is None and self.restore_error:
                    raise SuiteError(self.restore_error) from None
                return self._prctl_never()
            raise SuiteError(f"cannot set THP {mode!r} in {self.sysfs}: {e.strerror}") from None
        in_force = current(self.sysfs)
        if in_force["enabled"] != mode:
            raise SuiteError(
                f"wrote THP {mode!r} to {self.sysfs}/enabled but it reads back {in_force['enabled']!r}"
            )
        return Applied(mode, "sysfs", False, in_force, in_force)

    def _prctl_never(self) -> Applied:
        """`never` for one server: PR_SET_THP_DISABLE in the child, the system setting untouched."""
        sys_now = current(self.sysfs)
        in_force = {"enabled": PRCTL_NEVER, "defrag": sys_now.get("defrag")}
        return Applied("never", "prctl", True, in_force, sys_now)

    def _write(self, name: str, value: str) -> None:
        (self.sysfs / name).write_text(value)

    def _save_original(self) -> None:
        """Record the values before the first write; refuse to change THP if that fails."""
        if self.original is not None:
            return
        original = current(self.sysfs)
        record = {
            "original": original,
            "pid": os.getpid(),
            "run_dir": str(self.run_dir or ""),
            "sysfs": str(self.sysfs),
        }
        text = json.dumps(record, indent=1) + "\n"
        required, *optional = _record_files(self.sysfs, self.run_dir)
        try:
            _write_record(required, text)
        except OSError as e:
            raise SuiteError(
                f"{required}: cannot record the original THP values ({e.strerror}); THP not changed"
            ) from None
        for f in optional:
            try:
                _write_record(f, text)
            except OSError:
                pass  # the required record exists; /run may be read-only or not ours
        self.original = original

    def restore(self) -> dict | None:
        """Put the original values back and verify them; see the class docstring for the result."""
        if self.original is None:
            return None
        with signals_held():
            orig = self.original
            problems = []
            before = current(self.sysfs)
            for name in ("enabled", "defrag"):
                if orig.get(name) and before.get(name) != orig[name]:  # write only what changed
                    try:
                        self._write(name, orig[name])
                    except OSError as e:
                        problems.append(f"writing {name}={orig[name]} failed ({e.strerror or e})")
            now = current(self.sysfs)
            for name in ("enabled", "defrag"):
                want = orig.get(name)
                if want and now.get(name) != want:
                    problems.append(f"{name} reads back {now.get(name)!r}, not {want!r}")
            if problems:
                kept = [str(f) for f in self._records() if f.exists()]
                self.restore_error = (
                    f"THP NOT RESTORED in {self.sysfs}: {'; '.join(problems)}. Original values"
                    f" {orig} kept in {', '.join(kept) or '(no record)'}; put them back with"
                    " `mallocsweep doctor --restore-thp` (as root)"
                )
                print(f"mallocsweep: WARNING: {self.restore_error}", file=sys.stderr)
                self._mark_records(self.restore_error)
                return None
            for f in self._records():
                _unlink_if_ours(f, str(self.sysfs))
            self.original = None
            self.restore_error = None
            return orig

    def _records(self) -> list[Path]:
        return _record_files(self.sysfs, self.run_dir)

    def _mark_records(self, error: str) -> None:
        """Note the failed restore in our records (for doctor and whoever reads the run dir)."""
        for f in self._records():
            rec = _read_record(f)
            if rec and rec.get("pid") == os.getpid() and rec.get("sysfs") == str(self.sysfs):
                rec["restore_error"] = error
                try:
                    _write_record(f, json.dumps(rec, indent=1) + "\n")
                except OSError:
                    pass


def _write_record(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)


def _read_record(path: Path) -> dict | None:
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _unlink_if_ours(path: Path, sysfs: str) -> None:
    rec = _read_record(path)
    if rec and rec.get("pid") == os.getpid() and rec.get("sysfs") == sysfs:
        path.unlink(missing_ok=True)


def leftover() -> dict | None:
    """A THP change left by a runner that died (SIGKILL) or could not restore: its record, else None.

    Looks in the user's state directory, then in the machine-wide /run record."""
    for pf in (pending_file(), SYSTEM_PENDING):
        rec = _read_record(pf)
        if rec is None:
            continue
        pid = rec.get("pid")
        try:
            cmdline = " ".join(ProcFS().cmdline(int(pid)))
        except (CollectorError, TypeError, ValueError):
            cmdline = ""
        # A live python process with that pid is taken as the runner still at work (pid reuse by
        # an unrelated python process is possible but only delays the restore: doctor says so).
        rec["runner_alive"] = "python" in cmdline or "mallocsweep" in cmdline
        rec["record_file"] = str(pf)
        return rec
    return None


def restore_leftover() -> dict | None:
    rec = leftover()
    if rec is None:
        return None
    if rec.get("runner_alive"):
        raise SuiteError(
            f"the run that changed THP (pid {rec['pid']}) is still running; it restores THP itself"
        )
    sysfs = Path(rec.get("sysfs") or SYSFS)
    original = rec.get("original") or {}
    with signals_held():
        for name, value in original.items():
            if value:
                try:
                    (sysfs / name).write_text(value)
                except OSError as e:
                    raise SuiteError(
                        f"cannot restore THP {name}={value} in {sysfs}: {e.strerror}"
                    ) from None
        now = current(sysfs)
        wrong = [
            f"{k} reads back {now.get(k)!r}" for k, v in original.items() if v and now.get(k) != v
        ]
        if wrong:
            raise SuiteError(
                f"THP restore in {sysfs} did not take: {'; '.join(wrong)}; records kept"
            )
        for f in (pending_file(), SYSTEM_PENDING):
            other = _read_record(f)
            if other is not None and other.get("pid") == rec.get("pid"):
                f.unlink(missing_ok=True)
        if rec.get("run_dir"):  # that run's own copy: restored now
            (Path(rec["run_dir"]) / PENDING_NAME).unlink(missing_ok=True)
    return rec
