"""The MySQL family's plugin: MariaDB, MySQL and Percona Server (this folder's server.py,
my_cnf.py, flavor.py, engines.py; its clients' driver.py).

What is particular to it, and only here: its [server] settings (buffer pool, storage engines and
MyRocks' memory, my.cnf lines, where the binary comes from: a basedir, a fetched server), the
my.cnf it runs with (suites.families.mysql.my_cnf, sized for the workload's largest level), a prepared
dataset restored per cell (mariadb-install-db / --initialize-insecure, a `mysql/` schema in every
datadir it caches, only `.frm` files hard-linked on restore), the client host's account (CREATE
USER), and SHOW GLOBAL STATUS counters by meaning.
"""

from __future__ import annotations

import math
import secrets
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from servers.acquire.archive import parse_spec
from servers.acquire.fetch import lookup
from servers.checks import Check
from servers.errors import ServerError
from servers.verify import refuse_self_allocating
from suites.config.errors import FieldError
from suites.config.sections import ServerSection
from suites.config.settings import existing, mycnf_int, packet_limit
from suites.errors import SuiteError
from suites.families.base import Family, ServerLaunch, ServerNeeds
from suites.families.mysql.driver import DRIVER
from suites.families.mysql.engines import check_engine
from suites.families.mysql.my_cnf import adopt, extra_lines
from suites.families.mysql.server import PFS_MEMORY, MySQLServer, MySQLSettings, find_mysql
from suites.target import ClientTarget

FLAVORS = ("mariadb", "mysql", "percona")
# Per-connection memory of a server thread at rest (thread stack + net buffers + sort/join
# buffers touched by OLTP_RO); deliberately generous.
PER_CONNECTION_KB = 1024
# A fresh MariaDB datadir besides its redo log: ibdata1 (12 MiB), Aria logs, the mysql schema.
# Measured: a fresh MariaDB 10.11 datadir with a 256 MiB redo log takes 273 MiB.
SYSTEM_FILES_KB = 32 * 1024
# The account a client host's clients log in with (remote_target).
CLIENT_USER = "mallocsweep_client"

# SHOW GLOBAL STATUS counters by meaning (rundir.format.COUNTER_MEANINGS). The status columns of
# results.csv (threads_created, bp_reads, bp_read_requests, server_memory_used_kb,
# threads_connected) read InnoDB's buffer pool whatever the tables' engine, as they always have.
COUNTERS = {
    "threads_created": "Threads_created",
    "clients_connected": "Threads_connected",
    "pages_read_from_disk": "Innodb_buffer_pool_reads",
    "page_read_requests": "Innodb_buffer_pool_read_requests",
    "memory_used_bytes": "Memory_used",  # MariaDB's own account (MySQL's: counters())
}
# The warmup's two questions per storage engine: reads that missed the engine's cache, and what
# the cache holds. MyRocks keeps no gauge of its block cache's content in its status, so its
# second counter is the cumulative count of blocks added: "levelled off" then means no block was
# added in a check.
CACHE_COUNTERS = {
    "innodb": ("Innodb_buffer_pool_reads", "Innodb_buffer_pool_pages_data"),
    "rocksdb": ("Rocksdb_block_cache_miss", "Rocksdb_block_cache_add"),
}


# my.cnf settings our [server] fields write (suites/families/mysql/my_cnf.py): never also in settings
FIELD_SETTINGS = {
    "innodb_buffer_pool_size": "buffer_pool_mb",
    "rocksdb_block_cache_size": "rocksdb_block_cache_mb",
}


class MySQLServerSection(ServerSection):
    flavor: Literal[FLAVORS] = Field(  # type: ignore[valid-type]
        "mariadb", description="Server family; MySQL-family flavors are detected from --version."
    )
    basedir: str = Field(
        "",
        description="A MySQL/Percona install directory with bin/mysqld inside (relative to the "
        "suite file's directory).",
    )
    fetched: str = Field(
        "",
        description='A server of `mallocsweep servers fetch`, by its SPEC (e.g. "mariadb-10.11.18"); '
        "instead of binary/basedir.",
    )
    buffer_pool_mb: PositiveInt = Field(256, description="innodb_buffer_pool_size in MiB.")
    engines: list[Literal["innodb", "rocksdb"]] = Field(
        default_factory=lambda: ["innodb"],
        description="Storage engines of the workload's tables, a matrix dimension (--engines): "
        "innodb, rocksdb (MyRocks: MariaDB's ha_rocksdb.so plugin, Debian package "
        "mariadb-plugin-rocksdb). The dataset is prepared once per engine.",
    )
    rocksdb_block_cache_mb: PositiveInt = Field(
        256, description="MyRocks rocksdb_block_cache_size in MiB (its buffer pool)."
    )
    rocksdb_write_buffer_mb: PositiveInt = Field(
        64,
        description="MyRocks memtable size in MiB (write_buffer_size of the default column "
        "family); with the block cache, the engine's own memory.",
    )
    settings: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Extra my.cnf [mysqld] settings, as written in my.cnf (MySQL family only); "
        "the port, socket, directories and bind address are ours, and so are the settings the "
        "tool writes from what it records (buffer pool and redo sizes, malloc-lib, "
        "performance_schema, buffer pool dump/load); innodb_flush_log_at_trx_commit is recorded.",
    )

    @field_validator("engines")
    @classmethod
    def _engines(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected at least one engine")
        if len(set(v)) != len(v):
            raise ValueError(f"duplicate engines in {v}")
        return v

    @field_validator("basedir")
    @classmethod
    def _basedir(cls, v: str, info: ValidationInfo) -> str:
        return existing(v, info, "directory") if v else v

    @field_validator("fetched")
    @classmethod
    def _fetched(cls, v: str) -> str:
        # Only the shape here: whether it is fetched is the runner's question (servers.acquire.fetch.lookup).
        if v:
            try:
                parse_spec(v)
            except ServerError as e:
                raise ValueError(str(e)) from None
        return v

    @field_validator("settings", mode="before")
    @classmethod
    def _settings(cls, v: Any) -> Any:
        # Checked here, not when my.cnf is rendered in the first cell: a bad key must stop the run
        # before a run directory exists, with the file and line.
        if not isinstance(v, dict):
            return v  # the type check says what is expected
        for key, value in v.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"the value of {key!r} is not a finite number")
            if not isinstance(value, str | int | float | bool):
                raise ValueError(
                    f"the value of {key!r} must be a string, a number or true/false (a my.cnf value)"
                )
        try:
            rest, _ = adopt(v)
            extra_lines({str(k): str(x) for k, x in rest.items()})
        except ServerError as e:
            raise ValueError(str(e).removeprefix("server.settings: ")) from None
        for key in ("max_connections", "max_allowed_packet"):
            if key in v and mycnf_int(v[key]) is None:
                raise ValueError(
                    f'{key} = {v[key]!r}: expected a whole number (e.g. 2000 or "64M")'
                )
        return v

    @model_validator(mode="after")
    def _settings_against_fields(self):
        # A my.cnf setting that one of our fields writes too: which one the server took was
        # my.cnf's order, while the manifest, the report and the memory preflight all said the
        # field's value (innodb_buffer_pool_size = "8G" beside buffer_pool_mb = 64 ran an 8 GB
        # pool recorded as 64 MB). Refused, naming both.
        for key, value in self.settings.items():
            name = str(key).strip().lower().replace("-", "_").removeprefix("loose_")
            field = FIELD_SETTINGS.get(name)
            if field:
                raise FieldError(
                    ("server", "settings"),
                    f"{key} = {value!r} conflicts with server.{field} = {getattr(self, field)!r}, "
                    f"which sets {name}: give the size in server.{field} only (the manifest, "
                    "the report and the memory preflight read it)",
                )
        return self

    @model_validator(mode="after")
    def _one_server(self):
        if self.fetched and (self.binary or self.basedir or self.root):
            raise ValueError("give either fetched or binary/basedir/root, not both")
        if self.root and self.basedir:
            raise FieldError(
                ("server", "basedir"),
                "with server.root, name the binary inside the root (server.binary), not a basedir",
            )
        return self


def client_account(connect, database: str) -> tuple[str, str]:
    """The account a client host's clients log in with, on a running server (`connect()` gives a
    root connection): root is reachable over the unix socket only, a client host comes over TCP
    from another address. A fresh random password per server life, allowed on the workload's
    database only; never recorded (a level's recorded argv masks it), it dies with the cell's
    datadir copy."""
    password = secrets.token_hex(16)
    conn = connect()
    try:
        cur = conn.cursor()
        cur.execute(f"CREATE USER IF NOT EXISTS '{CLIENT_USER}'@'%' IDENTIFIED BY %s", (password,))
        cur.execute(f"ALTER USER '{CLIENT_USER}'@'%' IDENTIFIED BY %s", (password,))
        cur.execute(f"GRANT ALL PRIVILEGES ON `{database}`.* TO '{CLIENT_USER}'@'%'")
        cur.close()
    finally:
        conn.close()
    return CLIENT_USER, password


class MySQLFamily(Family):
    name = "mysql"
    flavors = FLAVORS
    section = MySQLServerSection
    summary = "MariaDB, MySQL, Percona Server"
    refusals = {
        "cache_gb": "cache_gb is MongoDB's WiredTiger cache; a MySQL-family server's is "
        "buffer_pool_mb (rocksdb_block_cache_mb for MyRocks)",
    }
    driver = DRIVER
    restores_dataset = True
    links_allocators = True
    preloads = True
    runs_in_root = True

    # -- the suite ------------------------------------------------------------------------------
    def engines(self, server) -> tuple[str, ...]:
        return tuple(server.engines)

    def connection_limit(self, server) -> int | None:
        # Without max_connections in the suite the server is sized for the workload (settings).
        given = server.settings.get("max_connections")
        return None if given is None else mycnf_int(given)

    def statement_limit(self, server) -> tuple[int | None, bool]:
        return packet_limit(server.settings)

    def cache_kb(self, server) -> int:
        return server.buffer_pool_mb * 1024

    # Explicit huge pages (large_pages = ON: MariaDB's large_pages, MySQL's --large-pages): the
    # buffer pool, and on MariaDB also its two redo log buffers, key cache and Aria page cache
    # (measured on 10.11.19 with a 256 MB pool: 256 + 2 x 16 MB, 124 MB and 106 MB, all hugetlb;
    # MySQL 9.7 put its two 128 MB chunks on 2 x 132 MB and nothing else).
    no_large_pages = ""
    LARGE_PAGES_SLACK = 1.06  # chunk rounding and InnoDB's block descriptors beside the pool
    MARIADB_LARGE_PAGE_USERS = {  # setting -> its default, bytes (how often it is mapped)
        "key_buffer_size": (128 << 20, 1),
        "aria_pagecache_buffer_size": (128 << 20, 1),
        "innodb_log_buffer_size": (16 << 20, 2),
    }

    def large_pages_kb(self, server, binary) -> int:
        kb = server.buffer_pool_mb * 1024 * self.LARGE_PAGES_SLACK + 16 * 1024
        if getattr(binary, "flavor", "mariadb") == "mariadb":
            for name, (default, times) in self.MARIADB_LARGE_PAGE_USERS.items():
                size = mycnf_int(server.settings.get(name, default))
                kb += times * (default if size is None else size) / 1024
        return math.ceil(kb)

    def with_large_pages(self, server):
        return server.model_copy(update={"settings": {**server.settings, "large_pages": "ON"}})

    def settings(
        self,
        server,
        max_threads: int,
        prepared_statements: int = 0,
        engine: str = "innodb",
        launch: ServerLaunch | None = None,
    ) -> MySQLSettings:
        """What its my.cnf is rendered from (suites.families.mysql.my_cnf)."""
        extra, adopted = adopt(server.settings)
        return MySQLSettings(
            **adopted,
            engine=engine,
            rocksdb_block_cache_mb=server.rocksdb_block_cache_mb,
            rocksdb_write_buffer_mb=server.rocksdb_write_buffer_mb,
            buffer_pool_mb=server.buffer_pool_mb,
            max_threads=max_threads,
            # What the largest level's clients hold at once, so max_prepared_stmt_count never
            # caps it.
            prepared_statements=prepared_statements,
            extra={k: str(v) for k, v in extra.items()},
            mark_buffer_pool=bool(launch and launch.memory_parts),
            memory_account=bool(launch and launch.memory_account),
        )

    def needs(self, server, max_threads: int, prepared_statements: int = 0) -> ServerNeeds:
        s = self.settings(server, max_threads, prepared_statements)
        return ServerNeeds(
            open_files=s.open_files_limit,
            per_connection_kb=PER_CONNECTION_KB,
            # the redo log is preallocated to its full size
            base_datadir_kb=s.innodb_log_file_mb * 1024 + SYSTEM_FILES_KB,
        )

    def doctor_checks(self) -> list[Check]:
        """The MySQL-family server on this machine and the tool that initialises its datadir."""
        try:
            b = find_mysql(None, None)
        except ServerError as e:
            return [
                Check(
                    "mysql-family server",
                    False,
                    str(e),
                    "apt-get install mariadb-server (or give --server PATH to a mysqld)",
                )
            ]
        return [
            Check("mysql-family server", True, f"{b.path}: {b.flavor} {b.version_string}"),
            Check(
                "datadir initialisation",
                b.install_tool is not None,
                b.install_tool or f"no mariadb-install-db next to {b.path}",
                None if b.install_tool else "apt-get install mariadb-server",
            ),
        ]

    # -- resolution -----------------------------------------------------------------------------
    def resolve(self, server) -> tuple[Any, str]:
        if server.fetched:
            # A fetched server is a basedir on the host's libraries or a root of another release.
            f = lookup(server.fetched)
            if f.kind == "basedir":
                b = find_mysql(None, f.path)
            else:
                b = find_mysql(f.binary, None, root=f.path)
        else:
            b = find_mysql(server.binary or None, server.basedir or None, root=server.root or None)
        # mariadb is the default flavor: it takes whatever MySQL-family server is found
        if server.flavor != FLAVORS[0] and b.flavor != server.flavor:
            raise SuiteError(
                f"server.flavor is {server.flavor!r} but {b.path} is {b.flavor} {b.version}"
            )
        return b, f"{b.flavor}-{b.version}"

    def check_allocators(self, binary, allocators) -> None:
        # A binary that links an allocator itself (Debian's MySQL 9.7 links tcmalloc) has no
        # glibc arm; said once, before anything runs.
        for a in allocators:
            refuse_self_allocating(Path(binary.host_path), a)

    def check_engines(self, binary, engines) -> None:
        for engine in engines:
            check_engine(binary, engine)

    # -- a server life --------------------------------------------------------------------------
    def make_server(self, launch: ServerLaunch) -> MySQLServer:
        return MySQLServer(
            launch.binary,
            launch.workdir,
            self.settings(
                launch.server,
                launch.max_threads,
                launch.prepared_statements,
                launch.engine,
                launch,
            ),
            launch.allocator,
            thp_disable=launch.thp_disable,
            extra_preload=launch.extra_preload,
            first_preload=launch.first_preload,
            bind_address=launch.bind_address,
            late_preload=launch.late_preload,
            extra_env=launch.extra_env,
        )

    def status(self, life: MySQLServer):
        return life.global_status

    def live_status(self, life: MySQLServer):
        return life.connection_status

    def counters(self, engine: str = "innodb", binary=None) -> dict[str, str]:
        missed, held = CACHE_COUNTERS[engine]
        out = COUNTERS | {"cache_misses": missed, "cache_fill": held}
        if binary is not None and binary.flavor != "mariadb":
            # MySQL/Percona have no Memory_used: performance_schema's memory total, where the
            # server has it on (suites.families.mysql.server.PFS_MEMORY)
            out["memory_used_bytes"] = PFS_MEMORY
        return out

    def target(self, life: MySQLServer, database: str) -> ClientTarget:
        return self.driver.target(life.client_target(), database)

    def remote_target(self, life: MySQLServer, database: str) -> ClientTarget:
        """TCP to the bound address, as an account of this server life only (root is local)."""
        user, password = client_account(life.connect, database)
        info = life.client_target()
        return ClientTarget(
            driver_ref=self.driver.ref,
            host=info["host"],
            port=info["port"],
            socket=None,
            user=user,
            password=password,
            database=database,
        )

    def connect(self, life: MySQLServer):
        return life.connect

    # -- datasets -------------------------------------------------------------------------------
    def dataset_key(self, server) -> dict:
        """Every [server] setting the suite writes into my.cnf: some change the on-disk format
        (innodb_page_size, innodb_checksum_algorithm, innodb_default_row_format,
        lower_case_table_names, character sets...), and telling those from the harmless ones per
        server version is guesswork. The buffer pool, MyRocks' memory and the connection sizing
        are ours and format-neutral."""
        return {"server_settings": {str(k): str(v) for k, v in sorted(server.settings.items())}}

    def datadir(self, workdir: Path) -> Path:
        return Path(workdir) / "datadir"

    def initialize(self, life: MySQLServer) -> None:
        life.initialize()

    def create_database(self, life: MySQLServer, name: str) -> None:
        conn = life.connect()
        try:
            conn.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{name}`")
        finally:
            conn.close()

    def datadir_problem(self, datadir: Path) -> str | None:
        if not (Path(datadir) / "mysql").is_dir():
            return "not a MySQL-family datadir (no mysql/ schema)"
        return None

    def linkable(self, rel: Path) -> bool:
        """Only `*.frm`: the server writes a table definition once at CREATE and replaces it by
        rename at ALTER. Everything else is written in place even under a read-only workload —
        *.ibd pages are flushed (purge, change-buffer merges, statistics), ibdata1/undo*, the
        redo log, ib_buffer_pool, Aria system tables (open counters in their headers),
        aria_log*, db.opt (rewritten by ALTER DATABASE), CSV log tables: a hard-linked file
        written by one cell would silently change the pristine copy and every later cell."""
        return Path(rel).suffix == ".frm"


MYSQL = MySQLFamily()
