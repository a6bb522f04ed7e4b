"""The read-while-writing table: (id BIGINT primary key, v VARBINARY(value_bytes)) on the cell's
engine. VARBINARY keeps the value in the row as the study's key-value stores keep it next to the
key (up to the engine's row limit, suites.workloads.rww.spec.MAX_VALUE_BYTES)."""

from __future__ import annotations

from suites.errors import SuiteError
from suites.workloads.level_result import ClientTarget
from suites.workloads.rww.spec import TABLE, RwwSpec


def create_table_sql(spec: RwwSpec, engine: str) -> str:
    """The table's DDL on `engine`, as the dialect names it (Driver.engine_sql)."""
    return (
        f"CREATE TABLE {TABLE} (id BIGINT NOT NULL PRIMARY KEY, "
        f"v VARBINARY({spec.value_bytes}) NOT NULL) ENGINE={engine}"
    )


def prepare(target: ClientTarget, spec: RwwSpec) -> None:
    """An empty table on the spec's engine; SuiteError (one line) if the server refuses it."""
    import MySQLdb

    try:
        conn = target.driver.connect(target, database=False)
    except MySQLdb.Error as e:
        raise SuiteError(f"rww: cannot connect to the server: {e}") from None
    try:
        cur = conn.cursor()
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{target.database}`")
        cur.execute(f"USE `{target.database}`")
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cur.execute(create_table_sql(spec, target.driver.engine_sql(spec.engine)))
        cur.execute(
            "SELECT engine FROM information_schema.tables WHERE table_schema = %s "
            "AND table_name = %s",
            (target.database, TABLE),
        )
        got = (cur.fetchone() or [""])[0]
        if str(got).lower() != spec.engine:  # the server may silently substitute its default
            raise SuiteError(f"rww: the table was created on {got!r}, not {spec.engine}")
    except MySQLdb.Error as e:
        raise SuiteError(f"rww: cannot create the table on {spec.engine}: {e}") from None
    finally:
        conn.close()
