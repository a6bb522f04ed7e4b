"""Host metadata for the manifest, and the host state at the start of each cell.

Comparisons across runs check these (pyperf's _CHECKED_METADATA idea): a different kernel, CPU,
glibc or THP mode changes allocator behaviour, so they are recorded, never assumed. Every reader
tolerates a missing file (containers hide some of /sys): the key is then None.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import socket
import sys
from pathlib import Path

from collectors.procfs import ProcFS
from collectors.thp_sysfs import SYSFS, parse_choice

CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def thp_state(thp_dir: Path = SYSFS) -> dict:
    enabled, defrag = _read(thp_dir / "enabled"), _read(thp_dir / "defrag")
    return {
        "enabled": parse_choice(enabled),
        "defrag": parse_choice(defrag),
        "enabled_line": enabled,
        "defrag_line": defrag,
    }


def glibc_version() -> str | None:
    """The running glibc's version, e.g. "2.36"; None on another C library. The one owner:
    servers/allocators.py asks here too."""
    try:
        v = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
        if v:
            return v.split()[-1]
    except (ValueError, OSError):
        pass
    try:
        fn = ctypes.CDLL(None).gnu_get_libc_version
        fn.restype = ctypes.c_char_p
        return fn().decode()
    except (OSError, AttributeError):
        return None


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    text = _read(cpuinfo) or ""
    for key in ("model name", "Hardware", "cpu model", "Model"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.M)
        if m:
            return m.group(1).strip()
    return platform.processor() or None


def memory_kb(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", _read(meminfo) or "", re.M)
    return int(m.group(1)) if m else None


def host_metadata() -> dict:
    """What the manifest records about the machine once per run."""
    uname = os.uname()
    try:
        affinity = len(os.sched_getaffinity(0))
    except OSError:
        affinity = None
    return {
        "hostname": socket.gethostname(),
        "kernel": uname.release,
        "kernel_version": uname.version,
        "machine": uname.machine,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_usable": affinity,
        "memory_kb": memory_kb(),
        "glibc_version": glibc_version(),
        "thp": thp_state(),
        "cpu_governor": _read(CPUFREQ / "scaling_governor"),
        "python": sys.version.split()[0],
        "boot_id": _read(Path("/proc/sys/kernel/random/boot_id")),
        "perf_event_paranoid": _read(Path("/proc/sys/kernel/perf_event_paranoid")),
    }


def cell_host_state(proc_root: str = "/proc") -> dict:
    """The host at the start of a cell: load (other work on the machine skews figures) and THP."""
    try:
        load = list(ProcFS(proc_root).loadavg())
    except Exception:  # noqa: BLE001 - informational only
        load = None
    return {"loadavg": load, "thp": thp_state()}
