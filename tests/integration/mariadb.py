"""A real MariaDB with a sysbench dataset, for integration tests that need one (started, prepared,
always stopped by the caller's try/finally)."""

from __future__ import annotations

from pathlib import Path

from servers.allocators import Allocator, resolve
from suites.families.mysql.driver import DRIVER as MYSQL_DRIVER
from suites.families.mysql.server import MySQLServer, MySQLSettings, find_mysql
from suites.workloads.level_result import ClientTarget
from suites.workloads.sysbench import SysbenchOptions, prepare


def sbtest_target(srv: MySQLServer) -> ClientTarget:
    return MYSQL_DRIVER.target(srv.client_target(), "sbtest")


# The smallest sysbench dataset that measures anything (runs_helpers.SMALL_SUITE's).
SMALL_DATASET = SysbenchOptions(tables=2, table_size=2000)


def start_empty(
    workdir: Path, settings: MySQLSettings, allocator: Allocator | None = None
) -> MySQLServer:
    """Start MariaDB in `workdir` (on workdir/datadir if it is there, e.g. the conftest's
    copy_pristine; else initialised here) under `allocator` (glibc), create an empty sbtest.
    The server is running: the caller stops it."""
    srv = MySQLServer(find_mysql(), workdir, settings, allocator or resolve(["glibc"])[0])
    try:
        if not srv.datadir.exists():
            srv.initialize()
        srv.start(timeout_s=120)
        conn = srv.connect()
        conn.cursor().execute("CREATE DATABASE sbtest")
        conn.close()
        return srv
    except BaseException:
        srv.stop()
        raise


def start_prepared(
    workdir: Path,
    opts: SysbenchOptions,
    settings: MySQLSettings,
    log: Path,
    allocator: Allocator | None = None,
):
    """start_empty, and sbtest loaded with the stock tables.

    Returns (server, target, prepare seconds). The server is running: the caller stops it.
    """
    srv = start_empty(workdir, settings, allocator)
    try:
        target = sbtest_target(srv)
        return srv, target, prepare(target, opts, log)
    except BaseException:
        srv.stop()
        raise
