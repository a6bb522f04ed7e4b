"""The dataset of a run: prepared once per (server version, dataset spec), restored per cell.

Preparing 4 x 50M sysbench rows takes hours; restoring a pristine copy takes minutes. The pristine
datadir is made by a server under glibc malloc (no allocator is under test while loading data) and
shut down cleanly, so every cell starts from byte-identical files and a cold buffer pool. What the
datadir is and how its server is made, started and given databases is the server family's
(Family.restores_dataset, make_server, initialize, create_database, datadir, datadir_problem);
what goes into it is the workload's (dataset_spec, databases, prepare_dataset).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from rundir.write import make_owned_dir, remove_owned_dir
from servers import interrupts
from servers.allocators import resolve
from servers.cachedir import cache_base
from servers.errors import ServerError
from servers.verify import linked_allocators
from suites.datasets.cache import DatasetCache
from suites.datasets.stale import remove_stale
from suites.errors import SuiteError
from suites.families.base import DEFAULT_ENGINE, ServerLaunch
from suites.families.registry import family_for
from suites.workloads import registry as workloads


def default_cache_root() -> Path:
    return cache_base() / "datasets"


@dataclass
class Prepared:
    cache: DatasetCache
    key: str
    spec: dict
    prepared_now: bool
    prepare_s: float | None
    # work directories of killed runs removed from the cache first (suites/datasets/stale.py)
    stale_removed: list[str] = field(default_factory=list)
    # each workload's tables, as its prepare made them (a dataset cached before this was kept:
    # none known, and a stock workload's are known by name)
    tables: dict[str, list[str]] = field(default_factory=dict)

    def to_manifest(self) -> dict:
        return {
            "key": self.key,
            "spec": self.spec,
            "prepared_now": self.prepared_now,
            "prepare_s": self.prepare_s,
            "cache": str(self.cache.root) if hasattr(self.cache, "root") else None,
            "stale_removed": list(self.stale_removed),
            "tables": self.tables,
        }


def dataset_spec(suite) -> dict:
    """What the workload's pristine datadir holds (its plugin says)."""
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


def cache_spec(suite, binary, engine: str = "innodb", server=None) -> dict:
    """Everything a pristine datadir depends on, hashed into its cache key.

    The dataset itself, the server flavor and build, and what the family says its files depend
    on (Family.dataset_key: for the MySQL family every [server] setting the suite writes into
    my.cnf, some of which change the on-disk format; a needless prepare costs time, a wrong reuse
    costs correctness). `server`: the [server] section of one server of a run with several (the
    suite's own by default).
    """
    server = server if server is not None else suite.server
    # The engine is in the key when it is not the default (every pristine datadir cached before
    # engines existed is InnoDB's, and keeps its key).
    engine_key = {} if engine == DEFAULT_ENGINE else {"engine": engine}
    return (
        dataset_spec(suite)
        | engine_key
        | {
            "flavor": binary.flavor,
            "binary": binary_identity(getattr(binary, "host_path", binary.path)),
        }
        | family_for(server).dataset_key(server)
    )


def cache_key(
    suite, binary, cache: DatasetCache, engine: str = "innodb", server=None
) -> tuple[str, dict]:
    """(key, spec) of this suite's pristine datadir for `binary`: the one key `ensure` and
    `is_cached` (the runner's preflight) both use, so they cannot disagree."""
    spec = cache_spec(suite, binary, engine, server)
    return cache.key(binary.version, spec), spec


def is_cached(suite, binary, cache_root: Path, server=None) -> bool:
    """Whether `ensure` would find this suite's pristine datadirs for `binary`, one per engine
    (no preparation)."""
    server = server if server is not None else suite.server
    cache = DatasetCache(Path(cache_root))
    engines = family_for(server).engines(server)
    return all(cache.has(cache_key(suite, binary, cache, e, server)[0]) for e in engines)


def _loading_allocator(binary) -> str:
    """The allocator the data is loaded under: glibc, unless the binary links an allocator itself
    (Debian's MySQL 9.7 has libtcmalloc.so.4 in DT_NEEDED): then its own, `builtin`, which is
    what it runs with when nothing is preloaded. No allocator is under test while loading."""
    try:
        linked = linked_allocators(Path(getattr(binary, "host_path", binary.path)))
    except ServerError:  # unreadable here: the server's own start says why
        return "glibc"
    return "builtin" if linked else "glibc"


def ensure(
    suite,
    binary,
    cache_root: Path,
    run_dir,
    engine: str = DEFAULT_ENGINE,
    server=None,
    name: str = "",
) -> Prepared:
    """The cached pristine datadir for this suite, server and engine, preparing it if missing.
    `server`, `name`: one server of a run with several (its section and name; its logs go to
    logs/dataset-NAME)."""
    server = server if server is not None else suite.server
    family = family_for(server)
    wl = workloads.of(suite)
    cache = DatasetCache(Path(cache_root), linkable=family.linkable)
    key, spec = cache_key(suite, binary, cache, engine, server)
    stale = remove_stale(Path(cache_root))  # what a SIGKILL during an earlier prepare left
    if cache.has(key):
        tables = cache.meta(key).get("tables") or {}
        return Prepared(cache, key, spec, False, None, stale, tables)
    Path(cache_root).mkdir(parents=True, exist_ok=True)
    work = make_owned_dir(Path(cache_root) / f".prepare-{key}-{os.getpid()}")
    parts = [p for p in (name, "" if engine == DEFAULT_ENGINE else engine) if p]
    logs = run_dir.path / "logs" / "-".join(["dataset", *parts])
    logs.mkdir(parents=True, exist_ok=True)
    glibc = resolve([_loading_allocator(binary)], root=getattr(binary, "root", None))[0]
    life = family.make_server(
        ServerLaunch(
            binary=binary,
            workdir=work,
            server=server,
            allocator=glibc,
            engine=engine,
            max_threads=64,
            prepared_statements=wl.prepared_statements(suite),
        )
    )
    t0 = time.monotonic()
    try:
        family.initialize(life)
        life.start(timeout_s=suite.server.startup_timeout_s)
        for database in wl.databases(suite):
            family.create_database(life, database)
        target = family.target(life, wl.database)
        made = wl.prepare_dataset(suite, target, logs, engine, connect=family.connect(life))
        life.stop()
        meta = {
            "spec": spec,
            "server_version": binary.version,
            "prepare_s": round(made.seconds, 3),
            "total_s": round(time.monotonic() - t0, 3),
            "tables": made.tables,
        }
        cache.store(key, family.datadir(work), meta, check=family.datadir_problem)
        return Prepared(cache, key, spec, True, round(made.seconds, 3), stale, made.tables)
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
            if life.alive:
                life.stop()
            remove_owned_dir(work)
