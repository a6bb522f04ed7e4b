"""Open an iibench backend for a target: the backend its driver names
(suites.families.driver.Driver.iibench_backend), imported when first asked for, so a MySQL-only
run never loads pymongo (and the reverse)."""

from __future__ import annotations

from suites.errors import SuiteError
from suites.target import load_driver
from suites.workloads.iibench.backend import Backend
from suites.workloads.level_result import ClientTarget


def open_backend(target: ClientTarget, *, create_database: bool = False) -> Backend:
    """Connect to `target`. `create_database` creates target.database first (SQL)."""
    driver = target.driver
    if not driver.iibench_backend:
        raise SuiteError(f"iibench: no iibench backend speaks {driver.name}")
    return load_driver(driver.iibench_backend)(target, create_database=create_database)
