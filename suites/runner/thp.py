"""Hugepage settings as a matrix dimension: set for a cell, given back after it — and checked.

What a cell may change (suites.config.hugepage_settings.HugepageSetting) is system-wide: THP enabled and
defrag, khugepaged's max_ptes_none (sysfs), and vm.nr_hugepages (the explicit huge pages a
large-pages cell reserves for its buffer pool). Each is changed for one cell only, and put back
as soon as the cell's server has been reaped (other work on the machine — other people's servers
— must see the machine as it was); SIGINT/SIGTERM are held while a restore writes.

The original values are saved *before* the first write — in the run directory, in the user's
state directory, and (for the real sysfs and /proc, when we may write them) in a fixed
root-owned file, /run/mallocsweep/thp-pending.json, that `mallocsweep doctor` finds whichever
user or HOME runs it. A runner killed with SIGKILL restores nothing: the next run, or `mallocsweep
doctor --repair`, finds the record of a runner that is gone, puts every value back and says so.

A restore writes each value, reads it back and compares. Only when every value matches are the
pending records deleted; otherwise they stay (doctor shows them), the controller keeps the
original values so a later restore (atexit) tries again, and the failure is printed and kept in
`restore_error`.

While a cell has the system changed it holds an exclusive lock (/run/mallocsweep/system.lock): a
second run of ours that wants to change it waits, so neither measures the other's setting nor
records it as "the original".

Without write access, `never` is still possible per server: PR_SET_THP_DISABLE, set in the child
before exec and inherited by the server. `always`/`madvise` cannot be forced without root.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from collectors.errors import CollectorError
from collectors.hugepages import system_hugepages
from collectors.procfs import ProcFS
from collectors.thp_sysfs import (
    MACHINE_LOCK,
    MAX_PTES_NONE,
    SYSFS,
    max_ptes_none,
    max_ptes_none_limit,
    offered,
    read_choice,
    signals_held,
    system_modes,
)
from rundir.atomic import atomic_write
from servers import interrupts
from suites.config.hugepage_settings import HugepageSetting
from suites.errors import SuiteError

PENDING_NAME = "thp-original.json"
# Root-owned and per machine (tmpfs: gone after a reboot, as is the change itself).
SYSTEM_PENDING = Path("/run/mallocsweep/thp-pending.json")
PRCTL_NEVER = "never (prctl)"  # what "in force" means for a server started with PR_SET_THP_DISABLE
NR_HUGEPAGES = "nr_hugepages"  # /proc/sys/vm/nr_hugepages: the persistent pool of explicit pages
# What a restore record may hold, in the order restores write them.
KNOBS = ("enabled", "defrag", MAX_PTES_NONE, NR_HUGEPAGES)
DEFAULT_PROC = Path("/proc")


def _state_dir() -> Path:
    base = os.environ.get("MALLOCSWEEP_STATE") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "mallocsweep"
    )
    return Path(base)


def pending_file() -> Path:
    return _state_dir() / PENDING_NAME


def _record_files(sysfs: Path, run_dir: Path | None, proc: Path = DEFAULT_PROC) -> list[Path]:
    """Where the original values of a change are kept (the first is required)."""
    files = [pending_file()]
    if run_dir is not None:
        files.append(Path(run_dir) / PENDING_NAME)
    if Path(sysfs) == SYSFS:  # a test's fake sysfs never touches the machine-wide record
        files.append(SYSTEM_PENDING)
    return files


def current(sysfs: Path = SYSFS) -> dict[str, str | None]:
    return system_modes(sysfs)


def state(sysfs: Path = SYSFS, procfs: ProcFS | None = None) -> dict:
    """Every setting a cell may change, as it is now (None where unreadable)."""
    procfs = procfs or ProcFS()
    return current(sysfs) | {
        MAX_PTES_NONE: max_ptes_none(sysfs),
        NR_HUGEPAGES: procfs.sys_vm(NR_HUGEPAGES),
    }


def writable(sysfs: Path = SYSFS) -> bool:
    return os.access(sysfs / "enabled", os.W_OK) and os.access(sysfs / "defrag", os.W_OK)


def read_knob(name: str, sysfs: Path, procfs: ProcFS):
    if name == NR_HUGEPAGES:
        return procfs.sys_vm(NR_HUGEPAGES)
    if name == MAX_PTES_NONE:
        return max_ptes_none(sysfs)
    return read_choice(Path(sysfs) / name)


def write_knob(name: str, value, sysfs: Path, procfs: ProcFS) -> None:
    """One setting written (OSError as the kernel gives it)."""
    if name == NR_HUGEPAGES:
        procfs.write_sys_vm(NR_HUGEPAGES, int(value))
    else:
        (Path(sysfs) / name).write_text(str(value))


def _wait(seconds: float) -> None:
    interrupts.sleep(seconds)  # a Ctrl-C while waiting for another run's cell ends the wait


@dataclass(frozen=True)
class LargePagesNeed:
    """What a large-pages cell needs: `pages` explicit huge pages of `page_kb` each, reserved by
    us (reserve) or already free on the machine."""

    pages: int
    page_kb: int
    reserve: bool = True

    @classmethod
    def of(cls, kb: int, page_kb: int | None, reserve: bool = True) -> LargePagesNeed:
        size = page_kb or 2048
        return cls(math.ceil(kb / size), size, reserve)

    @property
    def mb(self) -> float:
        return self.pages * self.page_kb / 1024


@dataclass
class Applied:
    requested: str
    method: str  # "none" (system), "sysfs", "prctl"
    thp_disable: bool  # pass to the server launch (PR_SET_THP_DISABLE)
    in_force: dict  # read back after applying (prctl: "never (prctl)", system values beside)
    system: dict = field(default_factory=dict)  # the system-wide values read back
    setting: HugepageSetting | None = None
    large_pages: dict | None = None  # what was reserved and what the machine had then

    def to_manifest(self) -> dict:
        d = {"requested": self.requested, "method": self.method, "in_force": self.in_force}
        if self.system:
            d["system"] = self.system
        if self.setting is not None:
            d["setting"] = self.setting.to_manifest()
        if self.large_pages is not None:
            d["large_pages"] = self.large_pages
        return d


class ThpController:
    """Applies a hugepage setting per cell; restore() puts the original system values back
    (idempotent).

    restore() returns the values it restored (verified by reading them back), or None when nothing
    needed restoring — or when restoring failed: `restore_error` then says what and why, the pending
    records are kept for `mallocsweep doctor`, and a later restore() (atexit) tries again."""

    def __init__(
        self,
        run_dir: Path | None,
        sysfs: Path = SYSFS,
        defrag: str = "system",
        settings: list[HugepageSetting] | None = None,
        procfs: ProcFS | None = None,
        large_pages: LargePagesNeed | None = None,
    ):
        self.sysfs = Path(sysfs)
        self.run_dir = Path(run_dir) if run_dir else None
        self.defrag = defrag
        self.settings = {s.label: s for s in settings or ()}
        self.procfs = procfs or ProcFS()
        self.need = large_pages
        self.original: dict | None = None  # set once we changed something; cleared when restored
        self.restore_error: str | None = None
        self.last_restored: dict | None = None  # what the latest restore put back
        self._locked = False  # holds the process's share of the machine-wide lock
        atexit.register(self.restore)

    def setting(self, label: str) -> HugepageSetting:
        """The setting a label stands for (a bare mode when the suite gave no settings)."""
        s = self.settings.get(label)
        if s is not None:
            return s
        off = label in ("never", "system")
        return HugepageSetting(label, label, "system" if off else self.defrag)

    # -- before the run ----------------------------------------------------------------------
    def check(self, labels: list[str]) -> None:
        """Refuse early (before any cell runs and before anything is written or changed) what
        cannot be done here: a mode this kernel does not offer, a setting without write access,
        large pages without room or rights."""
        settings = [self.setting(x) for x in labels]
        thp = [s for s in settings if s.changes_thp]
        if thp and not self.sysfs.exists():
            raise SuiteError(
                f"thp.modes {[s.enabled for s in thp]}: {self.sysfs} does not exist; this kernel "
                "has no THP"
            )
        if thp:
            self._check_offered(thp)
        if not writable(self.sysfs):
            forced = [s for s in thp if s.enabled in ("always", "madvise")]
            if forced:
                raise SuiteError(
                    f"thp.modes: {forced[0].enabled!r} needs write access to {self.sysfs}/enabled"
                    " (run as root); 'never' works without it (per server, via PR_SET_THP_DISABLE)"
                )
            tuned = [s for s in thp if s.defrag != "system" or s.max_ptes_none is not None]
            if tuned:
                what = "defrag" if tuned[0].defrag != "system" else "max_ptes_none"
                raise SuiteError(
                    f"thp.{what}: setting it needs write access to {self.sysfs} (run as root)"
                )
        if any(s.large_pages for s in settings):
            self.check_large_pages()

    def _check_offered(self, thp: list[HugepageSetting]) -> None:
        choices = offered(self.sysfs)
        for s in thp:
            for name, value in (("enabled", s.enabled), ("defrag", s.defrag)):
                if value == "system" or not choices[name] or value in choices[name]:
                    continue
                field_ = "modes" if name == "enabled" else "defrag"
                what = f"{s.profile!r} sets {name}={value}" if s.profile else repr(value)
                raise SuiteError(
                    f"thp.{field_}: {what}, which this kernel does not offer ({self.sysfs}/{name}"
                    f" offers: {', '.join(choices[name])})"
                )
            if s.max_ptes_none is None:
                continue
            limit = max_ptes_none_limit(self.sysfs)
            where = f"{self.sysfs}/{MAX_PTES_NONE}"
            if limit is None:
                raise SuiteError(
                    f"thp.max_ptes_none {s.max_ptes_none}: this kernel has no {where} (no "
                    "khugepaged)"
                )
            if s.max_ptes_none > limit:
                raise SuiteError(
                    f"thp.max_ptes_none {s.max_ptes_none}: this kernel takes 0..{limit} ({where}: "
                    "a huge page's small pages minus one)"
                )

    def check_large_pages(self) -> None:
        """Large pages: root to reserve them and the memory to hold them, or free ones already
        reserved on the machine. One line each, saying how many are needed."""
        need = self.need
        if need is None:
            raise SuiteError("thp.large_pages: this server cannot say how many huge pages it needs")
        hp = system_hugepages(self.procfs)
        page_kb = hp.get("hugepage_size_kb") or need.page_kb
        if hp.get("hugepages_total") is None:
            raise SuiteError(
                "thp.large_pages: this kernel has no explicit huge pages (no HugePages_Total in "
                f"{self.procfs.root}/meminfo)"
            )
        free = hp.get("hugepages_free") or 0
        many = f"{need.pages} huge pages of {page_kb} kB ({need.mb:,.0f} MB)"
        if not need.reserve:
            if free < need.pages:
                raise SuiteError(
                    f"thp.large_pages: the buffer pool needs {many} free; HugePages_Free is "
                    f"{free}: reserve them (echo {(hp.get('hugepages_total') or 0) + need.pages - free}"
                    f" > {self.procfs.root}/sys/vm/{NR_HUGEPAGES}) or set large_pages_reserve = "
                    "true (needs root)"
                )
            return
        if not self.procfs.sys_vm_writable(NR_HUGEPAGES):
            raise SuiteError(
                f"thp.large_pages: reserving {many} needs write access to "
                f"{self.procfs.root}/sys/vm/{NR_HUGEPAGES} (run as root), or reserve them yourself "
                "and set large_pages_reserve = false"
            )
        try:
            avail = self.procfs.meminfo().get("MemAvailable", 0)
        except CollectorError:
            avail = 0
        if avail < need.pages * page_kb:
            raise SuiteError(
                f"thp.large_pages: the buffer pool needs {many}; MemAvailable is only "
                f"{avail / 1024:,.0f} MB"
            )

    # -- a cell ----------------------------------------------------------------------------------
    def apply(self, label: str) -> Applied:
        s = self.setting(label)
        if not s.changes_thp and not s.large_pages:
            if self.original is not None and self.restore() is None:
                raise SuiteError(self.restore_error or "THP could not be restored")
            cur = current(self.sysfs)
            return Applied(label, "none", False, cur, cur, setting=s)
        writes: list[tuple[str, object]] = []
        if s.changes_thp:
            writes.append(("enabled", s.enabled))
            if s.defrag != "system":
                writes.append(("defrag", s.defrag))
            if s.max_ptes_none is not None:
                writes.append((MAX_PTES_NONE, s.max_ptes_none))
        prctl = False
        if writes and not writable(self.sysfs):
            if s.enabled != "never" or len(writes) > 1:
                raise SuiteError(
                    f"thp mode {s.enabled!r} needs write access to {self.sysfs}/enabled (run as root)"
                )
            writes, prctl = [], True
        reserve = s.large_pages and self.need is not None and self.need.reserve
        names = [n for n, _ in writes] + ([NR_HUGEPAGES] if reserve else [])
        if names:
            self._save_original(names)
        try:
            for name, value in writes:
                self._write(name, str(value))
        except OSError as e:
            if s.enabled == "never" and not s.large_pages:
                # Per server instead: put the system back first, and say so if that fails.
                if self.restore() is None and self.restore_error:
                    raise SuiteError(self.restore_error) from None
                return self._prctl_never(s)
            self._undo()
            raise SuiteError(
                f"cannot set THP {s.enabled!r} in {self.sysfs}: {e.strerror}"
            ) from None
        for name, value in writes:
            now = self._read(name)
            if str(now) != str(value):
                self._undo()
                raise SuiteError(f"wrote {name}={value} to {self.sysfs} but it reads back {now!r}")
        lp = self._large_pages(s) if s.large_pages else None
        if prctl:
            applied = self._prctl_never(s)
            applied.large_pages = lp
            return applied
        in_force = current(self.sysfs)
        if any(n == MAX_PTES_NONE for n, _ in writes):
            in_force["max_ptes_none"] = max_ptes_none(self.sysfs)
        method = "sysfs" if writes else "none"
        return Applied(label, method, False, in_force, current(self.sysfs), s, lp)

    def _large_pages(self, s: HugepageSetting) -> dict:
        """Reserve the cell's huge pages (or check the free ones) and say what the machine has."""
        need = self.need
        if need is None:
            self._undo()
            raise SuiteError("thp.large_pages: this server cannot say how many huge pages it needs")
        before = system_hugepages(self.procfs)
        reserved = 0
        if need.reserve:
            total = self.procfs.sys_vm(NR_HUGEPAGES) or 0
            try:
                self._write_vm(total + need.pages)
            except OSError as e:
                self._undo()
                raise SuiteError(
                    f"cannot reserve {need.pages} huge pages ({NR_HUGEPAGES} {total} -> "
                    f"{total + need.pages}): {e.strerror}"
                ) from None
            reserved = need.pages
        after = system_hugepages(self.procfs)
        free = after.get("hugepages_free") or 0
        if free < need.pages:
            self._undo()
            got = free - (before.get("hugepages_free") or 0)
            raise SuiteError(
                f"large pages: the buffer pool needs {need.pages} huge pages of {need.page_kb} kB; "
                + (
                    f"the kernel made only {got} of the {need.pages} asked for (memory too "
                    "fragmented for 2 MB pages)"
                    if need.reserve
                    else f"HugePages_Free is {free}"
                )
            )
        return {
            "needed": need.pages,
            "page_kb": need.page_kb,
            "reserved": reserved,
            "before": before,
            "after": after,
        }

    def _undo(self) -> None:
        """A cell that cannot start under its setting: what was already written goes back."""
        if self.original is not None and self.restore() is None and self.restore_error:
            raise SuiteError(self.restore_error) from None

    def _prctl_never(self, s: HugepageSetting | None = None) -> Applied:
        """`never` for one server: PR_SET_THP_DISABLE in the child, the system setting untouched."""
        sys_now = current(self.sysfs)
        in_force = {"enabled": PRCTL_NEVER, "defrag": sys_now.get("defrag")}
        return Applied(s.label if s else "never", "prctl", True, in_force, sys_now, s)

    def _write(self, name: str, value: str) -> None:
        (self.sysfs / name).write_text(value)

    def _write_vm(self, value: int) -> None:
        self.procfs.write_sys_vm(NR_HUGEPAGES, value)

    def _write_any(self, name: str, value) -> None:
        if name == NR_HUGEPAGES:
            self._write_vm(int(value))
        else:
            self._write(name, str(value))

    def _read(self, name: str):
        return read_knob(name, self.sysfs, self.procfs)

    def _save_original(self, names: list[str]) -> None:
        """Record the values of `names` before their first write (added to the record of what
        this cell already changed); refuse to change anything if that fails."""
        have = dict(self.original or {})
        if self.original is None:
            # enabled and defrag are always recorded: what the machine ran with before
            have = current(self.sysfs)
        missing = [n for n in names if n not in have]
        if self.original is not None and not missing:
            return
        self._lock(missing)
        for n in missing:
            have[n] = self._read(n)
        record = {
            "original": have,
            "pid": os.getpid(),
            "run_dir": str(self.run_dir or ""),
            "sysfs": str(self.sysfs),
            "proc": str(self.procfs.root),
        }
        text = json.dumps(record, indent=1) + "\n"
        required, *optional = self._records()
        try:
            _write_record(required, text)
        except OSError as e:
            if self.original is None:
                self._unlock()
            raise SuiteError(
                f"{required}: cannot record the original THP values ({e.strerror}); THP not changed"
            ) from None
        for f in optional:
            try:
                _write_record(f, text)
            except OSError:
                pass  # the required record exists; /run may be read-only or not ours
        self.original = have

    def _lock(self, names: list[str]) -> None:
        """The machine-wide lock while this process has the system changed (module doc): taken
        before the first write to the real sysfs or /proc; one per process (every controller of
        this process shares it)."""
        real = (Path(self.sysfs) == SYSFS and any(n != NR_HUGEPAGES for n in names)) or (
            Path(self.procfs.root) == DEFAULT_PROC and NR_HUGEPAGES in names
        )
        if not real or self._locked:
            return
        MACHINE_LOCK.acquire(wait=_wait)
        self._locked = True

    def _unlock(self) -> None:
        if self._locked:
            self._locked = False
            MACHINE_LOCK.release()

    def restore(self) -> dict | None:
        """Put the original values back and verify them; see the class docstring for the result."""
        if self.original is None:
            return None
        with signals_held():
            orig = self.original
            problems = []
            before = {n: self._read(n) for n in orig}
            for name in [k for k in KNOBS if k in orig]:
                want = orig.get(name)
                if want is not None and str(before.get(name)) != str(want):  # only what changed
                    try:
                        self._write_any(name, want)
                    except OSError as e:
                        problems.append(f"writing {name}={want} failed ({e.strerror or e})")
            for name in [k for k in KNOBS if k in orig]:
                want, now = orig.get(name), self._read(name)
                if want is not None and str(now) != str(want):
                    problems.append(f"{name} reads back {now!r}, not {want!r}")
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
            self.last_restored = orig
            self._unlock()
            return orig

    def _records(self) -> list[Path]:
        return _record_files(self.sysfs, self.run_dir, self.procfs.root)

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
        rec = json.loads(path.read_text(encoding="utf-8"))
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
    """Put back what a runner that is gone left changed (its record's original values), verify
    each by reading it back, and clear its records. None when nothing was left; a one-line
    SuiteError when the runner is still at work or a value does not take (records kept)."""
    rec = leftover()
    if rec is None:
        return None
    if rec.get("runner_alive"):
        raise SuiteError(
            f"the run that changed THP (pid {rec['pid']}) is still running; it restores THP itself"
        )
    sysfs = Path(rec.get("sysfs") or SYSFS)
    procfs = ProcFS(rec.get("proc") or DEFAULT_PROC)
    original = {k: v for k, v in (rec.get("original") or {}).items() if v is not None}
    with signals_held():
        for name in [k for k in KNOBS if k in original]:
            value = original[name]
            if str(read_knob(name, sysfs, procfs)) == str(value):
                continue
            try:
                write_knob(name, value, sysfs, procfs)
            except OSError as e:
                raise SuiteError(
                    f"cannot restore {name}={value} ({e.strerror}); records kept"
                ) from None
        wrong = []
        for name, value in original.items():
            now = read_knob(name, sysfs, procfs)
            if str(now) != str(value):
                wrong.append(f"{name} reads back {now!r}")
        if wrong:
            raise SuiteError(f"restore did not take: {'; '.join(wrong)}; records kept")
        for f in (pending_file(), SYSTEM_PENDING):
            other = _read_record(f)
            if other is not None and other.get("pid") == rec.get("pid"):
                f.unlink(missing_ok=True)
        if rec.get("run_dir"):  # that run's own copy: restored now
            (Path(rec["run_dir"]) / PENDING_NAME).unlink(missing_ok=True)
    return rec


def restored_text(rec: dict) -> str:
    """What a restore of a killed run's record put back, in one line."""
    orig = rec.get("original") or {}
    values = ", ".join(f"{k}={v}" for k, v in orig.items() if v is not None)
    return f"restored what a killed run (pid {rec.get('pid')}) left changed: {values}"
