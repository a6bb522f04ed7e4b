"""Fixtures shared by the integration tests (helpers that are plain functions: runs_helpers.py,
mariadb.py, roots.py).

What the session shares, so that a test pays only for what its purpose needs:
- session_cache (tests/conftest.py, autouse): MALLOCSWEEP_CACHE for the whole session, so every
  run, in process or not, reads each server binary's ELF tables once and builds each shim once;
- dataset_cache: that cache as a dataset cache. A run given it restores the pristine datadir an
  earlier run of the session prepared for the same (server build, dataset spec); a test whose
  purpose is the preparation itself, or that interrupts one, keeps a cache of its own;
- mysql_root, mariadb_root, older_mariadb: servers fetched from Debian's archive, fetched in the
  background from the moment the tests are collected (roots.py);
- pristine_datadir(binary): an initialised, empty datadir per server build (mariadb-install-db,
  mysqld --initialize-insecure), made once per session: `copy_pristine(binary, workdir)` gives a
  server its own copy instead of initialising one;
- mariadb_life(allocator): one running MariaDB per allocator for the session, with SMALL_DATASET
  loaded in sbtest: started at first use, stopped at the session's end (a failing test or
  Ctrl-C: pytest's session teardown; a killed pytest: the parent-death signal every child of ours
  gets). For tests that read from a server, or write only in a database of their own (created
  and dropped by them); a test that changes sbtest or server globals (what it changes for a
  moment, it puts back, as test_sysbench_levels' LOCK TABLES), kills or restarts the server, or
  needs its whole-life totals (wait4, reconciliation) starts a server of its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from servers.allocators import resolve
from servers.errors import ServerError
from suites.families.mysql.server import MySQLServer, MySQLSettings, ServerBinary, find_mysql
from tests.integration import roots
from tests.integration.mariadb import SMALL_DATASET, start_prepared
from tests.integration.runs_helpers import scratch_dir

# The session fixtures that fetch servers, and what roots.start_prefetch calls each.
ROOT_FIXTURES = {"mysql_root": "mysql", "older_mariadb": roots.OLDER, "mariadb_root": "mariadb"}


def pytest_collection_finish(session) -> None:
    """Start fetching the servers the collected tests will ask for, in the order they are
    likely to be asked (MySQL first: test_client_host comes early)."""
    wanted = {f for item in session.items for f in getattr(item, "fixturenames", ())}
    fetches = [what for name, what in ROOT_FIXTURES.items() if name in wanted]
    if fetches and os.geteuid() == 0 and shutil.which("debootstrap"):
        roots.start_prefetch(fetches, Path(tempfile.mkdtemp(prefix="ms-prefetch-")))


def pytest_sessionfinish(session, exitstatus) -> None:
    roots.stop_prefetch()


@pytest.fixture(scope="session")
def dataset_cache(session_cache) -> Path:
    """The session's dataset cache (MALLOCSWEEP_CACHE for a run of ours, or cache_root): a
    dataset is prepared by the first run of the session that needs it, restored by the next."""
    return session_cache


@pytest.fixture
def out():
    """A directory for one test's run directories and files, removed afterwards."""
    with scratch_dir("ms-run-") as d:
        yield d


# -- fetched servers ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def mysql_root() -> Path:
    """The newest MySQL of Debian unstable, in a root of its own (roots.rooted_server)."""
    return roots.rooted_server("mysql")


@pytest.fixture(scope="session")
def mariadb_root() -> Path:
    """The newest MariaDB of Debian 13, in a root of its own (roots.rooted_server)."""
    return roots.rooted_server("mariadb")


@pytest.fixture(scope="session")
def older_mariadb() -> str:
    """The spec of the newest MariaDB patch of the host's release older than the host's, fetched
    as a basedir (roots.older_mariadb_patch); fetch.fetch(spec) finds it cached."""
    return roots.older_mariadb_patch()


# -- datadirs and servers -------------------------------------------------------------------------
@pytest.fixture(scope="session")
def pristine_datadir() -> Iterator[Callable[[ServerBinary], Path]]:
    """pristine_datadir(binary) -> an initialised, empty datadir of that server build (made at
    first use; its redo log small, so copies are cheap: a server resizes it at start)."""
    made: dict[tuple, Path] = {}
    with scratch_dir("ms-pristine-") as base:

        def pristine(binary: ServerBinary) -> Path:
            key = (binary.path, binary.root)
            if key not in made:
                work = base / f"w{len(made)}"
                # initialize() runs the tool without any allocator: which one is named is moot.
                glibc = resolve(["glibc"], root=binary.root)[0]
                settings = MySQLSettings(buffer_pool_mb=32, max_threads=16, innodb_log_file_mb=16)
                MySQLServer(binary, work, settings, glibc).initialize()
                made[key] = work / "datadir"
            return made[key]

        yield pristine


@pytest.fixture(scope="session")
def copy_pristine(pristine_datadir) -> Callable[[ServerBinary, Path], Path]:
    """copy_pristine(binary, workdir) -> workdir/datadir, a copy of the pristine datadir: a
    MySQLServer(binary, workdir, ...) then starts on it without initialize()."""

    def copy(binary: ServerBinary, workdir: Path) -> Path:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        return Path(shutil.copytree(pristine_datadir(binary), Path(workdir) / "datadir"))

    return copy


@pytest.fixture(scope="session")
def mariadb_binary() -> ServerBinary:
    """The host's MariaDB (skips where none is installed)."""
    try:
        return find_mysql()
    except ServerError as e:
        pytest.skip(f"no MariaDB server installed ({e}); `make setup` installs mariadb-server")


# Sized for the largest client level (1536 threads: connections, thread cache, statements).
LIFE_SETTINGS = MySQLSettings(buffer_pool_mb=64, max_threads=1536, innodb_log_file_mb=48)


@pytest.fixture(scope="session")
def mariadb_life(mariadb_binary, copy_pristine, tmp_path_factory):
    """mariadb_life(allocator="glibc") -> (server, target, logs): a running MariaDB of the
    session under that allocator, SMALL_DATASET loaded in sbtest, sized for 1536 clients; the
    module doc says which tests may share it."""
    lives: dict[str, tuple] = {}
    with scratch_dir("ms-life-") as base:

        def life(allocator: str = "glibc"):
            if allocator not in lives:
                (alloc,) = resolve([allocator])
                if not alloc.usable:
                    pytest.skip(f"{allocator} not installed here: {alloc.why_not}")
                work = base / allocator
                copy_pristine(mariadb_binary, work)
                logs = tmp_path_factory.mktemp(f"life-{allocator}")
                srv, target, _ = start_prepared(
                    work, SMALL_DATASET, LIFE_SETTINGS, logs / "prepare.log", alloc
                )
                lives[allocator] = (srv, target, logs)
            return lives[allocator]

        try:
            yield life
        finally:
            for srv, _, _ in lives.values():
                srv.stop()
