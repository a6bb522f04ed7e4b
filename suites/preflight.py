"""Checks before a long run: refuse early, with the number that is short.

A matrix takes hours; discovering at cell 9 that the disk is full or that 1536 clients cannot open
their sockets wastes all of it. Each check compares a need with what the machine has.
"""

from __future__ import annotations

import os
import resource
import shutil
from dataclasses import dataclass
from pathlib import Path

from suites.errors import SuiteError

# Per-connection memory of a MySQL-family server thread at rest (thread stack + net buffers +
# sort/join buffers touched by OLTP_RO); deliberately generous.
PER_CONNECTION_KB = 1024
# Descriptors each side needs per client connection, plus a fixed allowance.
FD_PER_CLIENT = 2
FD_BASE = 512


@dataclass
class Need:
    what: str
    need: float
    have: float
    unit: str

    @property
    def ok(self) -> bool:
        return self.have >= self.need

    def line(self) -> str:
        return f"{self.what}: need {self.need:,.0f} {self.unit}, have {self.have:,.0f} {self.unit}"


def raise_nofile(need: int) -> int:
    """Raise our soft RLIMIT_NOFILE toward `need` (children inherit it); returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, need), hard) if hard != resource.RLIM_INFINITY else max(soft, need)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def mem_available_kb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def dir_size_kb(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total // 1024


def estimate_dataset_kb(kind: str, tables: int, table_size: int) -> int:
    """sysbench rows are ~230 bytes on disk with InnoDB overhead; plus system tablespaces."""
    base = 200 * 1024  # ibdata, undo, redo, mysql schema
    if kind == "sysbench":
        return base + tables * table_size * 230 // 1024
    return base


def checks(suite, out_root: Path, dataset_kb: int) -> list[Need]:
    max_threads = suite.max_threads
    needs: list[Need] = []
    # Disk: the pristine dataset plus one restored copy at a time (cells are removed as they finish),
    # plus redo/undo growth headroom of 25%.
    out_root.mkdir(parents=True, exist_ok=True)
    free_kb = shutil.disk_usage(out_root).free // 1024
    needs.append(Need(f"disk space under {out_root}", dataset_kb * 2.25, free_kb, "kB"))
    # Memory: the buffer pool (or WiredTiger cache) plus per-connection memory at the top level.
    if suite.server.flavor == "mongodb":
        pool_kb = int(suite.server.cache_gb * 1024 * 1024)
    else:
        pool_kb = suite.server.buffer_pool_mb * 1024
    needs.append(
        Need(
            "available memory for the server",
            pool_kb + max_threads * PER_CONNECTION_KB,
            mem_available_kb(),
            "kB",
        )
    )
    # Descriptors: one per client socket on each side, plus files.
    want_fd = FD_BASE + FD_PER_CLIENT * max_threads
    have_fd = raise_nofile(want_fd)
    needs.append(Need("open-file limit (ulimit -n)", want_fd, have_fd, "descriptors"))
    # Threads: the server's threads plus sysbench's client threads share the process limit.
    soft_proc, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    have_proc = float("inf") if soft_proc == resource.RLIM_INFINITY else soft_proc
    needs.append(
        Need("process/thread limit (ulimit -u)", 2 * max_threads + 256, have_proc, "threads")
    )
    return needs


def preflight(suite, out_root: Path, dataset_kb: int) -> list[dict]:
    """Run the checks; SuiteError naming the first shortfall. Returns the checks for the manifest."""
    results = checks(suite, Path(out_root), dataset_kb)
    for n in results:
        if not n.ok:
            raise SuiteError(f"preflight: {n.line()}")
    return [{"what": n.what, "need": n.need, "have": n.have, "unit": n.unit} for n in results]
