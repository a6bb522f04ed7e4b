"""Server families as plugins: what the runner does differently for MariaDB/MySQL/Percona and
for MongoDB, by the suite's `server.flavor`.

A family names its cell class (suites/cell_kinds.py: make the server, where its data comes from,
what clients connect to, where status is read), how its binary is resolved, the refusal of
allocators it cannot run with, whether its cells restore a prepared dataset, and the [server]
settings it cannot take (checked when the suite file is read, at their line). Adding a family:
a servers/ module with make / start / status / stop and the allocator verification, a cell class,
and one Family here (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from suites.cell_kinds import MongoCell, MySQLCell, WorkloadCell
from suites.config_errors import FieldError
from suites.errors import SuiteError
from suites.settings import mycnf_int


def _resolve_mongod(server):
    from servers.mongodb import find_mongod
    from servers.mysql_flavor import which_server

    # NAME or PATH, as for MySQL-family servers (`--server mongod`).
    b = find_mongod(str(which_server(server.binary)) if server.binary else None)
    return b, f"mongodb-{b.version}"


def _resolve_mysql(server):
    from servers.mysql import find_mysql

    if server.fetched:
        from servers.fetch import lookup

        # A fetched server is a basedir on the host's libraries or a root of another release.
        f = lookup(server.fetched)
        if f.kind == "basedir":
            b = find_mysql(None, f.path)
        else:
            b = find_mysql(f.binary, None, root=f.path)
    else:
        b = find_mysql(server.binary or None, server.basedir or None, root=server.root or None)
    if server.flavor != "mariadb" and b.flavor != server.flavor:
        raise SuiteError(
            f"server.flavor is {server.flavor!r} but {b.path} is {b.flavor} {b.version}"
        )
    return b, f"{b.flavor}-{b.version}"


def _mongod_allocators(binary, allocators) -> None:
    # A mongod with its own allocator refuses every preload: said once, up front, not once per
    # cell after THP was already changed.
    from servers.mongodb import check_allocators

    check_allocators(binary, allocators)


def _mysql_allocators(binary, allocators) -> None:
    # A MySQL-family binary that links an allocator itself (Debian's MySQL 9.7 links tcmalloc)
    # has no glibc arm; said once, before anything runs.
    from servers.verify import refuse_self_allocating

    for a in allocators:
        refuse_self_allocating(Path(binary.host_path), a)


def _mysql_engines(binary, engines) -> None:
    from servers.engines import check_engine

    for engine in engines:
        check_engine(binary, engine)


def _mongod_engines(binary, engines) -> None:
    # WiredTiger is mongod's one engine here; [server] engines is a MySQL-family dimension.
    if tuple(engines) != ("innodb",):
        raise SuiteError(
            f"server.engines {list(engines)}: storage engines are a MySQL-family dimension; "
            "a MongoDB suite runs mongod's own engine"
        )


def _mongod_suite(suite) -> None:
    # [server] settings of the MySQL family: refused at their line rather than silently unused.
    server = suite.server
    if server.engines != ["innodb"]:
        raise FieldError(
            ("server", "engines"),
            "engines are MySQL-family storage engines; MongoDB runs WiredTiger",
        )
    if server.settings:
        raise FieldError(
            ("server", "settings"),
            "these are my.cnf lines for a MySQL-family server; MongoDB does not read them",
        )
    if server.root:
        raise FieldError(
            ("server", "root"), "a server root runs MySQL-family servers only (not mongod)"
        )


def _mysql_connection_limit(suite) -> int | None:
    # Without max_connections in the suite the server is sized for the workload (mysql_settings).
    given = suite.server.settings.get("max_connections")
    return None if given is None else mycnf_int(given)


@dataclass(frozen=True)
class Family:
    name: str
    cell: type[WorkloadCell]
    resolve: object  # (suite.server) -> (binary, label)
    check_allocators: object  # (binary, allocators) -> None, or a refusal
    check_engines: object  # (binary, engines) -> None, or a refusal naming the engine
    # Cells restore a pristine prepared datadir (MySQL family); MongoDB starts empty.
    restores_dataset: bool
    # An allocator linked into the binary is measured as `builtin` under `all` (MySQL family).
    links_allocators: bool
    cache_kb: object  # (suite) -> the server's data cache (buffer pool, WiredTiger cache), kB
    # Its clients speak SQL and it reads my.cnf ([server] settings): what SQL workloads need.
    sql: bool
    # (suite) -> None, or a FieldError naming the [server] setting it cannot take.
    check_suite: object
    # (suite) -> the connections the suite lets the server take, or None: sized for the workload.
    connection_limit: object


MYSQL = Family(
    "mysql",
    MySQLCell,
    _resolve_mysql,
    _mysql_allocators,
    _mysql_engines,
    restores_dataset=True,
    links_allocators=True,
    cache_kb=lambda suite: suite.server.buffer_pool_mb * 1024,
    sql=True,
    check_suite=lambda suite: None,
    connection_limit=_mysql_connection_limit,
)
MONGODB = Family(
    "mongodb",
    MongoCell,
    _resolve_mongod,
    _mongod_allocators,
    _mongod_engines,
    restores_dataset=False,
    links_allocators=False,
    cache_kb=lambda suite: int(suite.server.cache_gb * 1024 * 1024),
    sql=False,
    check_suite=_mongod_suite,
    connection_limit=lambda suite: None,
)

FAMILIES: dict[str, Family] = {
    "mariadb": MYSQL,
    "mysql": MYSQL,
    "percona": MYSQL,
    "mongodb": MONGODB,
}


def family_of(suite) -> Family:
    """The server family of a loaded suite (its server.flavor)."""
    try:
        return FAMILIES[suite.server.flavor]
    except KeyError:
        raise SuiteError(
            f"server.flavor {suite.server.flavor!r}: no such server family "
            f"({', '.join(sorted(FAMILIES))})"
        ) from None
