"""What a server family's driver declares: how clients and we talk to its servers.

A family's driver (its folder's driver.py, `Family.driver`) is everything a workload needs to know
about the server's protocol and dialect, so no workload asks which family it runs on:

- `connect(target)`: a DB-API connection (autocommit) for our control connections and the Python
  load clients (rww's, the warmup's scans);
- `sysbench_driver`, `sysbench_args(target)` / `sysbench_prepare_args(engine)`: sysbench's
  `--db-driver` and its connection options, and the engine its `prepare` creates tables on;
- `iibench_backend`: the iibench backend class that speaks it ("module:Class", imported on first
  use so a run of one family never loads another's client library);
- its SQL dialect: `engine_sql(engine)` (the name in CREATE TABLE ... ENGINE=),
  `check_tables(cur, database, engine, tables)`, `primary_keyed(cur, database)` and
  `scan_sql(database, table, stock, keyed)` (the warmup's full scans).

A ClientTarget names its driver by `ref` ("module:NAME"), not by a kind to dispatch on: a load
client in another process, or a level agent on a client host, loads the same driver from it
(suites.target.load_driver). A driver imports its client library inside the method that needs it.
"""

from __future__ import annotations

from typing import Any

from suites.errors import SuiteError


class Driver:
    name: str = ""  # the protocol as records and messages say it ("mysql", "mongodb")
    ref: str = ""  # "module:NAME" of the instance: what a ClientTarget carries
    iibench_backend: str = ""  # "module:Class" of its iibench backend ("": iibench cannot)
    sysbench_driver: str = ""  # sysbench's --db-driver for it ("mysql", "pgsql"; "": none)

    def where(self, target) -> str:
        """The server's address in words, for messages."""
        return f"socket {target.socket}" if target.socket else f"{target.host}:{target.port}"

    def connect(self, target, *, database: bool = True) -> Any:
        """A DB-API connection to `target` (in its database unless `database` is False)."""
        raise SuiteError(f"{self.name}: no SQL connection (the workload needs one)")

    def sysbench_args(self, target) -> list[str]:
        """sysbench's --db-driver and connection options for `target`."""
        if not self.sysbench_driver:
            raise SuiteError(f"sysbench cannot drive {self.name} servers")
        return [f"--db-driver={self.sysbench_driver}"]

    def sysbench_prepare_args(self, engine: str) -> list[str]:
        """The options that make sysbench's `prepare` create its tables on `engine`."""
        return []

    def engine_sql(self, engine: str) -> str:
        """The storage engine's name in this dialect's CREATE TABLE."""
        raise SuiteError(f"{self.name}: no storage engines")

    def check_tables(self, cur, database: str, engine: str, tables: list[str] | None = None):
        """SuiteError unless the tables (all of `database`'s, or those named) are on `engine`."""

    def primary_keyed(self, cur, database: str) -> set[str]:
        """The tables of `database` that have a primary key."""
        return set()

    def scan_sql(self, database: str, table: str, stock: bool, keyed: bool) -> str:
        """A full scan of `table` along its primary key (the warmup's): the stock sysbench
        tables by AVG(id), others by COUNT(*)."""
        raise SuiteError(f"{self.name}: no SQL scans")
