"""Creating the iibench table/collection and checking what a level left in it."""

from __future__ import annotations

from suites.workloads.iibench.connect import open_backend
from suites.workloads.iibench.spec import IIBenchSpec
from suites.workloads.level_result import ClientTarget


def prepare(target: ClientTarget, spec: IIBenchSpec) -> None:
    """Create the database and an empty table/collection with the spec's secondary indexes,
    dropping any previous one: every level of insert load starts from empty."""
    backend = open_backend(target, create_database=True)
    try:
        backend.prepare(spec)
    finally:
        backend.close()


def count_rows(target: ClientTarget, spec: IIBenchSpec) -> int:
    """Rows (documents) now in the table (collection)."""
    backend = open_backend(target)
    try:
        return backend.count()
    finally:
        backend.close()


def index_keys(target: ClientTarget, spec: IIBenchSpec) -> list[tuple[str, tuple[str, ...]]]:
    """Secondary indexes present on the table/collection (primary key excluded), as (name, key
    columns in order): equal to `spec.indexes` when the schema is what the spec asked for."""
    backend = open_backend(target)
    try:
        return backend.index_keys()
    finally:
        backend.close()
