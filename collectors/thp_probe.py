"""Does PR_SET_THP_DISABLE also block regions advised with MADV_HUGEPAGE on this kernel?

Servers that switch THP off for themselves (Debian's MariaDB) use prctl(PR_SET_THP_DISABLE, 1).
Kernels differ in whether that also blocks memory an allocator advises with MADV_HUGEPAGE (newer
kernels add an opt-in "except advised" mode). The report's advice depends on the answer, so it is
measured here, once per run, in two throwaway child processes — never assumed.

The probe needs THP on: under system `never` even advised memory gets no huge pages and nothing can
be told. When the setting is `never` and we may write it (root), the probe switches it to `madvise`
for the second or so its children run — SIGINT/SIGTERM held meanwhile — and puts `never` back,
verified by reading it again; the result records that it did. Without write access the answer is
"could not be measured".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from collectors.thp_sysfs import MACHINE_LOCK, SYSFS, SYSTEM_LOCK, read_choice, signals_held

_CHILD = r"""
import ctypes, mmap, sys
if sys.argv[1] == "1":
    ctypes.CDLL(None, use_errno=True).prctl(41, ctypes.c_ulong(1), 0, 0, 0)  # PR_SET_THP_DISABLE
size = 8 << 20
m = mmap.mmap(-1, size + (2 << 20), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_HUGEPAGE)
for off in range(0, len(m), 4096):
    m[off] = 1
kb = 0
for line in open("/proc/self/smaps_rollup"):
    if line.startswith("AnonHugePages:"):
        kb = int(line.split()[1])
print(kb)
"""

PROBE_MODE = (
    "madvise"  # what the probe sets when the system says never: affects advised memory only
)


def _advised_huge_kb(with_prctl: bool) -> int | None:
    try:
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, "1" if with_prctl else "0"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return int(out.stdout.strip()) if out.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def _measure() -> tuple[int | None, int | None]:
    return _advised_huge_kb(False), _advised_huge_kb(True)


def prctl_blocks_madvise(sysfs: Path = SYSFS) -> dict:
    """{"advised_kb", "advised_with_prctl_kb", "blocks_madvise": True/False/None (cannot tell),
    "system_enabled", "probe_mode" (the mode it ran under), "forced" (it set that mode itself),
    "restore_error" (only if putting the system value back failed)}."""
    enabled_file = Path(sysfs) / "enabled"
    system = read_choice(enabled_file)
    result: dict = {"system_enabled": system, "probe_mode": system, "forced": False}
    # Forcing madvise is a system change like a cell's: only while no other run of ours has the
    # system changed (its cell may be running under this `never`; writing madvise, then `never`
    # back after that run restored its original, would leave the machine at `never`).
    # (A test's fake sysfs changes nothing of the machine's: no lock for it.)
    real = Path(sysfs) == SYSFS
    locked = False
    if system == "never" and os.access(enabled_file, os.W_OK):
        locked = MACHINE_LOCK.acquire(blocking=False) if real else True
        if not locked:
            result["force_error"] = (
                f"another mallocsweep run has the system THP setting changed ({SYSTEM_LOCK}): "
                "not forced"
            )
        elif read_choice(enabled_file) != system:  # changed before we held the lock
            if real:
                MACHINE_LOCK.release()
            return prctl_blocks_madvise(sysfs)
    try:
        free, blocked = _probe(enabled_file, system, result) if locked else _measure()
    finally:
        if locked and real:
            MACHINE_LOCK.release()
    verdict = None
    if free:  # advised memory got huge pages without the prctl: the comparison means something
        verdict = not blocked
    result.update(advised_kb=free, advised_with_prctl_kb=blocked, blocks_madvise=verdict)
    return result


def _probe(enabled_file: Path, system: str, result: dict) -> tuple[int | None, int | None]:
    """The measurement under PROBE_MODE, set for it and put back (the caller holds the lock)."""
    with signals_held():  # a Ctrl-C now must not leave the system setting changed
        try:
            enabled_file.write_text(PROBE_MODE)
        except OSError as e:
            result["force_error"] = f"cannot set {PROBE_MODE} for the probe: {e.strerror}"
            return None, None
        result.update(probe_mode=PROBE_MODE, forced=True)
        try:
            return _measure()
        finally:
            result.update(_put_back(enabled_file, system))
            if result.get("restore_error"):
                print(
                    f"mallocsweep: WARNING: THP NOT RESTORED after the probe: "
                    f"{result['restore_error']}; write {system!r} to it as root",
                    file=sys.stderr,
                )


def _put_back(enabled_file: Path, value: str) -> dict:
    try:
        enabled_file.write_text(value)
    except OSError as e:
        return {"restore_error": f"{enabled_file}: writing {value!r} back failed: {e.strerror}"}
    now = read_choice(enabled_file)
    if now != value:
        return {"restore_error": f"{enabled_file}: reads {now!r} after writing {value!r} back"}
    return {}
