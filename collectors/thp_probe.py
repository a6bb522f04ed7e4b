"""Does PR_SET_THP_DISABLE also block regions advised with MADV_HUGEPAGE on this kernel?

Servers that switch THP off for themselves (Debian's MariaDB) use prctl(PR_SET_THP_DISABLE, 1).
Kernels differ in whether that also blocks memory an allocator advises with MADV_HUGEPAGE (newer
kernels add an opt-in "except advised" mode). The report's advice depends on the answer, so it is
measured here, once per run, in two throwaway child processes — never assumed.
"""

from __future__ import annotations

import subprocess
import sys

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


def prctl_blocks_madvise() -> dict:
    """{"advised_kb", "advised_with_prctl_kb", "blocks_madvise": True/False/None (cannot tell)}."""
    free = _advised_huge_kb(False)
    blocked = _advised_huge_kb(True)
    verdict = None
    if free:  # advised memory got huge pages without the prctl: the comparison means something
        verdict = not blocked
    return {"advised_kb": free, "advised_with_prctl_kb": blocked, "blocks_madvise": verdict}
