"""The two things iibench talks to, behind one small interface.

A backend is one client connection: the runner uses one to prepare and to count, and every client
process opens its own (suites.workloads.iibench.connect.open_backend). Driver errors at connect
time become one-line SuiteErrors naming the address.
"""

from __future__ import annotations

from typing import Protocol

from suites.workloads.iibench.rows import Batch
from suites.workloads.iibench.spec import SECONDARY_INDEXES, IIBenchSpec
from suites.workloads.level_result import ClientTarget


class Backend(Protocol):
    def prepare(self, spec: IIBenchSpec) -> None:
        """Drop and create the table/collection with the spec's secondary indexes."""

    def insert(self, batch: Batch) -> None:
        """Insert one batch as one statement (one transaction for MySQL)."""

    def query(self, price_from: float) -> int:
        """One short range query on the first secondary index; the number of rows read."""

    def count(self) -> int: ...

    def index_keys(self) -> list[tuple[str, tuple[str, ...]]]:
        """Secondary indexes (the primary key excluded) as (name, key columns in key order), in
        the spec's order: the same shape as IIBenchSpec.indexes, so a check compares the keys."""

    def close(self) -> None: ...


def where(target: ClientTarget) -> str:
    """The address in words, for error messages."""
    return target.driver.where(target)


def in_spec_order(keys: dict[str, tuple[str, ...]]) -> list[tuple[str, tuple[str, ...]]]:
    """{name: columns} in SECONDARY_INDEXES order (servers list indexes in no defined order),
    unknown names last."""
    order = {name: i for i, (name, _) in enumerate(SECONDARY_INDEXES)}
    return sorted(keys.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
