"""Checks before a long run: refuse early, with the number that is short.

A matrix takes hours; discovering at cell 9 that the disk is full or that 1536 clients cannot open
their sockets wastes all of it. Each check compares a need with what the machine has. They run
before the run directory is created, so a refusal leaves nothing behind.

Ports are not checked here: no suite setting fixes a port. Each server start asks the kernel for a
free one and checks it just before launch (servers.ports), so a clash is named by port number.
"""

from __future__ import annotations

import os
import resource
import shutil
from dataclasses import dataclass
from pathlib import Path

from collectors.procfs import ProcFS
from servers.checks import open_files_needed, threads_needed
from suites.errors import SuiteError
from suites.families.base import ServerNeeds
from suites.families.registry import family_for
from suites.workloads import registry as workloads

# Redo, undo and temporary growth of a cell's datadir copy while its workload runs.
GROWTH = 1.25


@dataclass
class Need:
    what: str
    need: float
    have: float
    unit: str
    # The suite settings the need is computed from, named in a refusal so the user knows which
    # one to lower (e.g. "server.buffer_pool_mb 65536, sysbench.threads up to 1536")
    fields: str = ""

    @property
    def ok(self) -> bool:
        return self.have >= self.need

    def line(self) -> str:
        line = f"{self.what}: need {self.need:,.0f} {self.unit}, have {self.have:,.0f} {self.unit}"
        return f"{line} (from {self.fields})" if self.fields else line


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
    return ProcFS().meminfo().get("MemAvailable", 0)


def dir_size_kb(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total // 1024


def estimate_dataset_kb(suite, needs: ServerNeeds) -> int:
    """A prepared datadir: a fresh one of the server family's (for MySQL the redo log,
    preallocated to its full size, and the system files) and the workload's data (sysbench
    ~230 bytes per row)."""
    return needs.base_datadir_kb + workloads.of(suite).dataset_kb(suite)


def existing_ancestor(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (where a directory would be created)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def disk_needs(
    out_root: Path, cache_root: Path | None, dataset_kb: int, cached: bool, live: int = 1
) -> list[Need]:
    """Disk for the cells' datadir copies and, when the dataset is not cached yet, its preparation.

    Cells run one at a time and each removes its datadir copy when it ends (cell.py _remove_work),
    so the run directory's filesystem needs one copy (+25% growth) at a time, whatever the number of
    cells. Preparing the dataset needs the datadir being loaded plus the pristine copy stored from
    it, on the cache's filesystem; the loading copy is removed before the first cell. On a
    reflink-capable filesystem the copies cost far less; these are upper bounds.
    """
    live = max(1, live)
    copy_kb = dataset_kb * GROWTH * live
    out = existing_ancestor(out_root)
    one_cell = (
        f"one cell's datadir copy at a time ~{copy_kb:,.0f} kB (each is removed when it ends)"
        if live == 1
        else f"{live} cells' datadir copies at a time (a soak, or run.design alternate) ~{copy_kb:,.0f} kB"
    )
    if cache_root is None or cached:
        return [_disk(out, copy_kb, one_cell)]
    cache = existing_ancestor(cache_root)
    preparing = (
        f"preparing the dataset: the loading copy and the pristine one ~{dataset_kb:,} kB each"
    )
    if os.stat(cache).st_dev == os.stat(out).st_dev:
        need = max(2 * dataset_kb, dataset_kb + copy_kb)
        return [_disk(out, need, f"{preparing}, then the pristine one plus {one_cell}")]
    return [_disk(out, copy_kb, one_cell), _disk(cache, 2 * dataset_kb, preparing)]


def _disk(where: Path, need_kb: float, why: str) -> Need:
    free_kb = shutil.disk_usage(where).free // 1024
    return Need(f"disk space on the filesystem of {where} ({why})", need_kb, free_kb, "kB")


def checks(
    suite,
    out_root: Path,
    dataset_kb: int,
    cache_root: Path | None = None,
    cached: bool = True,
    needs: ServerNeeds | None = None,
    server=None,
    live_servers: int = 1,
) -> list[Need]:
    """`server`: the [server] section whose cache sizes the memory need (of several servers, the
    largest); the suite's by default. `live_servers`: servers alive at once (the alternate
    design keeps a round's arms alive together): memory, the datadir copies and the threads are
    needed that many times."""
    max_threads = suite.max_threads
    section = server if server is not None else suite.server
    family = family_for(section)
    server = needs or family.needs(section, max_threads)
    found = disk_needs(out_root, cache_root, dataset_kb, cached, live_servers)
    kind = getattr(getattr(suite, "suite", None), "kind", "sysbench")
    clients = f"{kind}.threads: up to {max_threads} clients"
    for n in found:
        n.fields = f"the dataset of [{kind}]/[dataset], ~{dataset_kb:,} kB"
    # Memory: the server's cache (its family's: buffer pool, WiredTiger cache) plus its
    # per-connection memory at the top level.
    cache_field = next(
        (f"server.{k} {getattr(section, k)}" for k in ("buffer_pool_mb", "cache_gb")
         if hasattr(section, k)),
        "the server's cache",
    )  # fmt: skip
    # Alternate: every live server holds its cache, and each has had the largest level's
    # clients (their thread caches stay after its block).
    live = max(1, live_servers)
    several = (
        f" x {live} servers alive at once (a soak, or run.design alternate)" if live > 1 else ""
    )
    found.append(
        Need(
            "available memory for the server" + ("s" if live > 1 else ""),
            live * (family.cache_kb(section) + max_threads * server.per_connection_kb),
            mem_available_kb(),
            "kB",
            f"{cache_field}, {clients}{several}",
        )
    )
    # Descriptors: the server and the clients inherit our limit; the larger need decides.
    want_fd = open_files_needed(max_threads, server.open_files)["limit"]
    have_fd = raise_nofile(want_fd)
    found.append(Need("open-file limit (ulimit -n)", want_fd, have_fd, "descriptors", clients))
    # Threads: the server's threads plus the clients' share the user's process limit (not for root).
    soft_proc, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    unlimited = soft_proc == resource.RLIM_INFINITY or os.geteuid() == 0
    found.append(
        Need(
            "process/thread limit (ulimit -u)",
            live * threads_needed(max_threads),
            float("inf") if unlimited else soft_proc,
            "threads",
            clients + several,
        )
    )
    return found


def usable_cache(path: Path) -> None:
    """The dataset cache must be a directory we can write, before the run directory is made: a
    file in its path or a read-only place otherwise fails as an internal error mid-run."""
    hint = "; set MALLOCSWEEP_CACHE to a writable directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SuiteError(f"dataset cache {path}: cannot create: {e.strerror}{hint}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise SuiteError(f"dataset cache {path}: not writable{hint}")


def preflight(
    suite,
    out_root: Path,
    dataset_kb: int,
    cache_root: Path | None = None,
    cached: bool = True,
    needs: ServerNeeds | None = None,
    server=None,
    live_servers: int = 1,
) -> list[dict]:
    """Run the checks; SuiteError naming the first shortfall. Returns the checks for the manifest."""
    if cache_root is not None:
        usable_cache(Path(cache_root))
    results = checks(
        suite, Path(out_root), dataset_kb, cache_root, cached, needs, server, live_servers
    )
    for n in results:
        if not n.ok:
            raise SuiteError(f"preflight: {n.line()}")
    return [{"what": n.what, "need": n.need, "have": n.have, "unit": n.unit} for n in results]
