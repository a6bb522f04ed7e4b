"""The dataset of a run: prepared once per (server version, dataset spec), restored per cell.

Preparing 4 x 50M sysbench rows takes hours; restoring a pristine copy takes minutes. The pristine
datadir is made by a server under glibc malloc (no allocator is under test while loading data) and
shut down cleanly, so every cell starts from byte-identical files and a cold buffer pool.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from rundir.write import make_owned_dir
from servers import interrupts
from suites.datadir_cache import DatasetCache
from suites.errors import SuiteError
from suites.stale_prepare import remove_stale


def default_cache_root() -> Path:
    from servers.cachedir import cache_base

    return cache_base() / "datasets"


@dataclass
class Prepared:
    cache: DatasetCache
    key: str
    spec: dict
    prepared_now: bool
    prepare_s: float | None
    # work directories of killed runs removed from the cache first (suites/stale_prepare.py)
    stale_removed: list[str] = field(default_factory=list)

    def to_manifest(self) -> dict:
        return {
            "key": self.key,
            "spec": self.spec,
            "prepared_now": self.prepared_now,
            "prepare_s": self.prepare_s,
            "cache": str(self.cache.root) if hasattr(self.cache, "root") else None,
            "stale_removed": list(self.stale_removed),
        }


def dataset_spec(suite) -> dict:
    """What the workload's pristine datadir holds (its plugin says)."""
    from suites import workloads

    return workloads.of(suite).dataset_spec(suite)


def binary_identity(path: str | os.PathLike) -> dict:
    """The server build a pristine datadir was made by: resolved path, size and mtime. Two builds
    with the same version string (a distro rebuild, a custom build with other defaults) may write
    different on-disk formats; a reinstall changes size or mtime, so it prepares again."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as e:
        raise SuiteError(f"server binary {path}: cannot stat: {e.strerror}") from None
    return {"path": real, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def cache_spec(suite, binary, engine: str = "innodb") -> dict:
    """Everything a pristine datadir depends on, hashed into its cache key.

    The dataset itself, the server flavor and build, and every [server] setting the suite writes
    into my.cnf: some change the on-disk format (innodb_page_size, innodb_checksum_algorithm,
    innodb_default_row_format, lower_case_table_names, character sets...), and telling those from
    the harmless ones per server version is guesswork; a needless prepare costs time, a wrong
    reuse costs correctness. The buffer pool and connection sizing are ours and format-neutral.
    """
    # The engine is in the key when it is not InnoDB (every pristine datadir cached before engines
    # existed is InnoDB's, and keeps its key). MyRocks' memory settings are not: format-neutral.
    engine_key = {} if engine == "innodb" else {"engine": engine}
    return (
        dataset_spec(suite)
        | engine_key
        | {
            "flavor": binary.flavor,
            "binary": binary_identity(getattr(binary, "host_path", binary.path)),
            "server_settings": {str(k): str(v) for k, v in sorted(suite.server.settings.items())},
        }
    )


def cache_key(suite, binary, cache: DatasetCache, engine: str = "innodb") -> tuple[str, dict]:
    """(key, spec) of this suite's pristine datadir for `binary`: the one key `ensure` and
    `is_cached` (the runner's preflight) both use, so they cannot disagree."""
    spec = cache_spec(suite, binary, engine)
    return cache.key(binary.version, spec), spec


def is_cached(suite, binary, cache_root: Path) -> bool:
    """Whether `ensure` would find this suite's pristine datadirs for `binary`, one per engine
    (no preparation)."""
    cache = DatasetCache(Path(cache_root))
    return all(cache.has(cache_key(suite, binary, cache, e)[0]) for e in suite.server.engines)


def _loading_allocator(binary) -> str:
    """The allocator the data is loaded under: glibc, unless the binary links an allocator itself
    (Debian's MySQL 9.7 has libtcmalloc.so.4 in DT_NEEDED): then its own, `builtin`, which is
    what it runs with when nothing is preloaded. No allocator is under test while loading."""
    from servers.errors import ServerError
    from servers.verify import linked_allocators

    try:
        linked = linked_allocators(Path(getattr(binary, "host_path", binary.path)))
    except ServerError:  # unreadable here: the server's own start says why
        return "glibc"
    return "builtin" if linked else "glibc"


def ensure(suite, binary, cache_root: Path, run_dir, engine: str = "innodb") -> Prepared:
    """The cached pristine datadir for this suite, server and engine, preparing it if missing."""
    from servers.allocators import resolve
    from servers.errors import ServerError
    from servers.mysql import MySQLServer
    from suites import workloads
    from suites.cell_kinds import mysql_settings
    from suites.workload import ClientTarget

    cache = DatasetCache(Path(cache_root))
    key, spec = cache_key(suite, binary, cache, engine)
    stale = remove_stale(Path(cache_root))  # what a SIGKILL during an earlier prepare left
    if cache.has(key):
        return Prepared(cache, key, spec, False, None, stale)
    Path(cache_root).mkdir(parents=True, exist_ok=True)
    work = make_owned_dir(Path(cache_root) / f".prepare-{key}-{os.getpid()}")
    logs = run_dir.path / "logs" / ("dataset" if engine == "innodb" else f"dataset-{engine}")
    logs.mkdir(parents=True, exist_ok=True)
    glibc = resolve([_loading_allocator(binary)], root=getattr(binary, "root", None))[0]
    settings = mysql_settings(suite, max_threads=64, engine=engine)
    server = MySQLServer(binary, work, settings, glibc)
    t0 = time.monotonic()
    try:
        server.initialize()
        server.start(timeout_s=suite.server.startup_timeout_s)
        conn = server.connect()
        try:
            cur = conn.cursor()
            cur.execute("CREATE DATABASE IF NOT EXISTS sbtest")
            cur.execute("CREATE DATABASE IF NOT EXISTS iibench")
        finally:
            conn.close()
        wl = workloads.of(suite)
        target = ClientTarget.mysql(server.client_target(), wl.database)
        prepare_s = wl.prepare_dataset(suite, target, logs, engine, connect=server.connect)
        server.stop()
        meta = {
            "spec": spec,
            "server_version": binary.version,
            "prepare_s": round(prepare_s, 3),
            "total_s": round(time.monotonic() - t0, 3),
        }
        cache.store(key, work / "datadir", meta)
        return Prepared(cache, key, spec, True, round(prepare_s, 3), stale)
    except ServerError as e:
        # The work directory goes below: keep the server's error log in the run's logs and name
        # that copy, not a file that will not exist when the user reads the message.
        message = str(e)
        for log in sorted(work.glob("*.log")):
            kept = logs / f"server-{log.name}"
            try:
                shutil.copy2(log, kept)
            except OSError:
                continue
            message = message.replace(str(log), str(kept))
        raise ServerError(message) from None
    finally:
        # Held: a signal never leaves a server running or a .prepare-* directory in the cache.
        with interrupts.held(), interrupts.doing("the dataset's server to stop"):
            if server.alive:
                server.stop()
            shutil.rmtree(work, ignore_errors=True)
