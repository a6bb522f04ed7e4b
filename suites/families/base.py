"""What a server family plugin declares, and what the runner asks of it.

A server family (MariaDB/MySQL/Percona; MongoDB) is one folder in suites/families/ (mysql/,
mongodb/): its plugin.py holds one subclass of Family, its driver.py the Driver its clients speak
(suites.families.driver), and beside them its server life and config file writer; it is
registered by its flavors in suites/families/registry.py. Everything the runner,
the dataset cache, the preflight, the warmup and the derivations do differently for a family is
a method or attribute here, so none of them names a server:

- its settings: `section`, its own pydantic model of the suite's [server] table (the common
  fields of ServerSection plus its own); the Suite model's [server] is the family's section,
  chosen by `server.flavor` (suites.suite.model);
- before anything runs: how its binary is found (`resolve`), the allocators, engines and suite
  settings it refuses (`check_allocators`, `check_engines`, `check_suite`), what it needs from
  the machine (`cache_kb`, `needs`);
- a server life: `make_server` turns a ServerLaunch into a servers.life.ServerLife (the family's
  config-file writer, readiness probe and allocator proof live in that class), `status` and
  `live_status` read it, `counters` names its status counters by meaning
  (rundir.format.COUNTER_MEANINGS; recorded in each cell's raw record, so rundir.derive knows no
  server), `target` / `remote_target` / `connect` are how clients and we reach it;
- datasets (`restores_dataset`): a fresh datadir (`initialize`), its databases
  (`create_database`), the check a datadir must pass before it is cached (`datadir_problem`),
  and which of its files a restore may hard-link (`linkable`).

Beyond one server per run: every method that needs server settings takes the family's own
section (`server`), never `suite.server`, so a run holding several servers of different
families asks each server's family with that server's section (suites.families.registry.family_for).
A server in a root (servers.root: another release's files, under chroot) is a launch variant, not
a family: the same settings, config file, datasets, counters and accounts apply; `resolve` hands
back a binary that knows its root, and the ServerLife launches it there. `runs_in_root` says
whether the family can.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servers.allocators import Allocator
from servers.life import ServerLife
from suites.config.sections import ServerSection
from suites.target import LEGACY_KINDS, ClientTarget, load_driver

Status = Callable[[], dict[str, float]]


# The engine of a cell whose suite names none; its cell ids carry no engine suffix
# (suites.runner.plan), and its dataset key no engine field.
DEFAULT_ENGINE = "innodb"


@dataclass(frozen=True)
class ServerLaunch:
    """Everything one server life is made from (Family.make_server)."""

    binary: Any  # what the family's resolve() found (messages name its .path)
    workdir: Path  # the life's own directory: its datadir, config file, logs
    server: ServerSection  # the family's [server] section
    allocator: Allocator
    engine: str = DEFAULT_ENGINE  # the storage engine of the workload's tables
    # The largest level's client connections and the prepared statements they hold at once
    # (what connection limits, thread caches and statement caches are sized for).
    max_threads: int = 64
    prepared_statements: int = 0
    thp_disable: bool = False  # PR_SET_THP_DISABLE for the server (THP "never" per process)
    bind_address: str = "127.0.0.1"  # the one address it listens on (a client host's, or loopback)
    # Libraries preloaded before the allocator (the keep_server_thp shim) and after it (the
    # alloc_stats shim), with their environment: only for a family with `preloads`.
    # `first_preload` comes before every other and lives in the work dir (so it runs in a server
    # root too): the exposure counter, which must win the binding and forward to the allocator.
    first_preload: tuple[str, ...] = ()
    extra_preload: tuple[str, ...] = ()
    late_preload: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    # RSS is taken apart by mapping ([memory] parts): a family whose server can mark its buffer
    # pool's mapping does so (collectors/smaps.py)
    memory_parts: bool = False
    # the workload reads the server's own account of its memory at every boundary
    # (server_memory_used_kb): a family that must switch something on for it does so
    memory_account: bool = False


@dataclass(frozen=True)
class ServerNeeds:
    """What one server life needs from the machine beside its data (suites.runner.preflight)."""

    open_files: int = 0  # its own descriptor limit (0: nothing beyond what the clients need)
    per_connection_kb: int = 1024  # memory per client connection at rest, generously
    base_datadir_kb: int = 0  # a fresh datadir before any workload data (logs, system tables)


class Family:
    name: str = ""  # how a record names the family ("mysql", "mongodb")
    # The server.flavor values it answers to; the first is its default.
    flavors: tuple[str, ...] = ()
    section: type[ServerSection] = ServerSection
    summary: str = ""  # what it runs, in a few words (messages, the help of [server] flavor)
    # Another family's [server] settings it refuses, and why (said at their line). A setting of
    # another family left at its default is ignored, as it was when one section held every
    # family's settings; any other value is refused (suites.families.registry).
    refusals: dict[str, str] = {}
    # How clients and we talk to its servers (suites.families.driver.Driver): its folder's
    # driver.py. None: no client reaches it (a family that only starts and stops servers).
    driver: Any = None
    # Cells restore a pristine prepared datadir; False: each life starts empty.
    restores_dataset: bool = False
    # An allocator linked into the binary is measured as `builtin` under `all`.
    links_allocators: bool = False
    # It can take libraries preloaded beside the allocator (keep_server_thp, alloc_stats).
    preloads: bool = False
    runs_in_root: bool = False  # it can run in a server root (servers.root)
    # Why it cannot put its data cache on explicit huge pages ([thp] large_pages), or "" if it can
    # (then large_pages_kb and with_large_pages say how).
    no_large_pages: str = "it has no setting that puts its data cache on explicit huge pages"

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        # A plugin written when `sql = True` said "speaks MySQL's protocol and SQL" (before
        # drivers): it gets the MySQL protocol's driver.
        if cls.__dict__.get("sql") and cls.__dict__.get("driver") is None:
            cls.driver = load_driver(LEGACY_KINDS["mysql"])

    @property
    def mysql_compatible(self) -> bool:
        """Its servers speak MySQL's protocol and SQL dialect and take my.cnf lines (MariaDB,
        MySQL, Percona, a test's stub of one): what the workloads written in that dialect need
        (sysbench with our Lua, rww, the fragmentation scenarios, iibench's packet limit). Said by
        its driver; a family with another protocol brings a driver of its own and is refused by
        them in one line."""
        return self.driver is not None and self.driver.name == "mysql"

    # -- the suite (validation, before any server runs) -----------------------------------------
    def check_suite(self, suite, server) -> None:
        """A suites.config.errors.FieldError for a rule across sections it cannot follow."""

    def engines(self, server) -> tuple[str, ...]:
        """The storage engines its cells run the workload's tables on (a matrix dimension)."""
        return (DEFAULT_ENGINE,)

    def connection_limit(self, server) -> int | None:
        """The connections the suite lets the server take, or None: sized for the workload."""
        return None

    def statement_limit(self, server) -> tuple[int | None, bool]:
        """(the largest statement the server takes, in bytes, or None: unknown or unchecked;
        whether the suite set it)."""
        return None, False

    def cache_kb(self, server) -> int:
        """The server's data cache (buffer pool, WiredTiger cache), kB: preflight memory."""
        raise NotImplementedError

    def needs(self, server, max_threads: int, prepared_statements: int = 0) -> ServerNeeds:
        return ServerNeeds()

    def large_pages_kb(self, server, binary) -> int:
        """What a server started with_large_pages maps on explicit huge pages, kB, generously
        (its buffer pool and whatever else its large-pages setting moves there): what a
        large-pages cell reserves."""
        raise NotImplementedError

    def with_large_pages(self, server):
        """Its [server] section with the data cache on explicit huge pages."""
        raise NotImplementedError

    def doctor_checks(self) -> list:
        """`mallocsweep doctor`'s lines for this family (servers.checks.Check): is its server
        installed here, and what to do if not. A family with nothing to check says nothing."""
        return []

    # -- resolution (before the run directory exists) ------------------------------------------
    def resolve(self, server) -> tuple[Any, str]:
        """(binary, label): the server binary the section names, and the run's server label."""
        raise NotImplementedError

    def check_allocators(self, binary, allocators: list[Allocator]) -> None:
        """Refuse (ServerError/SuiteError) an allocator the binary cannot run with, up front."""

    def check_engines(self, binary, engines) -> None:
        """Refuse an engine the binary does not have."""

    # -- a server life --------------------------------------------------------------------------
    def make_server(self, launch: ServerLaunch) -> ServerLife:
        raise NotImplementedError

    def settings_record(self, server, launch: ServerLaunch) -> dict | None:
        """What its config file was made from, for records (None: nothing beyond the server's
        own manifest)."""
        return None

    def status(self, life: ServerLife) -> Status | None:
        """The server's status counters at phase boundaries (numbers by their own names)."""
        return None

    def live_status(self, life: ServerLife) -> Status | None:
        """A cheaper status read while a level runs (None: `status`)."""
        return None

    def counters(self, engine: str = DEFAULT_ENGINE, binary: Any = None) -> dict[str, str]:
        """Its status counter for each meaning it has (rundir.format.COUNTER_MEANINGS), for the
        tables on `engine` (and the resolved `binary`, where flavors differ); a meaning it lacks
        is left out (its columns stay empty)."""
        return {}

    def target(self, life: ServerLife, database: str) -> ClientTarget:
        """Where local clients connect (the workload's `database`)."""
        raise NotImplementedError

    def remote_target(self, life: ServerLife, database: str) -> ClientTarget:
        """Where a client host's clients connect: an account of this life only."""
        raise NotImplementedError(f"{self.name}: no clients on a client host")

    def connect(self, life: ServerLife) -> Callable[[], Any]:
        """A factory of our own control connections (the caller closes each)."""
        raise NotImplementedError

    # -- datasets (restores_dataset) ------------------------------------------------------------
    def dataset_key(self, server) -> dict:
        """What of its settings a prepared datadir's files depend on (part of the cache key)."""
        return {}

    def datadir(self, workdir: Path) -> Path:
        """Where a life in `workdir` keeps its data: what is cached and restored."""
        raise NotImplementedError

    def initialize(self, life: ServerLife) -> None:
        """Make a fresh datadir for `life` (before its first start)."""
        raise NotImplementedError

    def create_database(self, life: ServerLife, name: str) -> None:
        raise NotImplementedError

    def datadir_problem(self, datadir: Path) -> str | None:
        """Why `datadir` is not one of this family's (cannot be cached), or None."""
        return None

    def linkable(self, rel: Path) -> bool:
        """Whether a restore may hard-link the pristine file at `rel` (never written in place by
        the server); a copy otherwise."""
        return False
