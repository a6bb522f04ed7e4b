"""Open an iibench backend for a target: the MySQL family through mysqlclient, MongoDB through
pymongo. Each backend's module is imported when its kind is first asked for, so a MySQL-only run
never loads pymongo (and the reverse): the one place in iibench where an import sits in a function.
"""

from __future__ import annotations

from suites.errors import SuiteError
from suites.workloads.iibench.backend import Backend
from suites.workloads.level_result import ClientTarget


def open_backend(target: ClientTarget, *, create_database: bool = False) -> Backend:
    """Connect to `target`. `create_database` creates target.database first (MySQL)."""
    if target.kind == "mysql":
        from suites.workloads.iibench.backend_mysql import MySQLBackend

        return MySQLBackend(target, create_database=create_database)
    if target.kind == "mongodb":
        from suites.workloads.iibench.backend_mongo import MongoBackend

        return MongoBackend(target)
    raise SuiteError(
        f"iibench: target kind {target.kind!r} is not supported; expected mysql or mongodb"
    )
