"""A family's driver is all the workloads know of its server (issue 32): a target names it by
reference and carries it into other processes, sysbench's arguments and the SQL dialect come from
it, and a plugin written before drivers still gets one."""

from __future__ import annotations

import dataclasses

import pytest

from suites.errors import SuiteError
from suites.families.base import Family
from suites.families.driver import Driver
from suites.families.mongodb.driver import DRIVER as MONGO
from suites.families.mongodb.plugin import MONGODB
from suites.families.mysql.driver import DRIVER as MYSQL
from suites.families.mysql.plugin import MYSQL as MYSQL_FAMILY
from suites.target import ClientTarget
from suites.workloads.iibench.connect import open_backend
from suites.workloads.sysbench.options import SysbenchOptions, level_argv, prepare_argv
from suites.workloads.sysbench.warm import scan_tables


class _PgDriver(Driver):
    """A driver of a family this tree does not have, in a test module: what a PostgreSQL
    family's driver.py would declare."""

    name = "pgsql"
    ref = f"{__name__}:PG"
    sysbench_driver = "pgsql"
    iibench_backend = f"{__name__}:_Backend"

    def sysbench_args(self, target) -> list[str]:
        return [*super().sysbench_args(target), f"--pgsql-host={target.host}",
                f"--pgsql-port={target.port}", f"--pgsql-db={target.database}"]  # fmt: skip


PG = _PgDriver()


class _Backend:
    def __init__(self, target, *, create_database=False):
        self.target, self.create_database = target, create_database


def test_a_target_names_its_driver_and_keeps_it_across_processes():
    t = MYSQL.target({"socket": "/s.sock", "port": 3307}, "sbtest")
    assert t.driver is MYSQL and t.protocol == "mysql"
    # a load client or a level agent rebuilds the target from its fields (JSON)
    again = ClientTarget(**dataclasses.asdict(t))
    assert again == t and again.driver is MYSQL
    assert ClientTarget(driver_ref=PG.ref).driver is PG


def test_a_target_without_a_driver_is_refused():
    with pytest.raises(ValueError, match="names its driver"):
        ClientTarget()
    with pytest.raises(ValueError, match="give its driver_ref"):
        ClientTarget(kind="postgres")


def test_the_kinds_before_drivers_name_the_shipped_drivers():
    assert ClientTarget(kind="mysql").driver is MYSQL
    assert ClientTarget(kind="mongodb").driver is MONGO


def test_sysbench_takes_its_arguments_from_the_driver():
    opts = SysbenchOptions(tables=2, table_size=50, storage_engine="rocksdb")
    argv = level_argv("w.lua", ClientTarget(driver_ref=PG.ref, host="db", port=5432), opts, 8, 5)
    assert "--db-driver=pgsql" in argv and "--pgsql-host=db" in argv
    assert not [a for a in argv if a.startswith("--mysql")]
    prep = prepare_argv(MYSQL.target({"socket": "/s.sock"}, "sbtest"), opts, 2)
    assert "--db-driver=mysql" in prep and "--mysql-socket=/s.sock" in prep
    # our engine name, in the MySQL dialect's spelling
    assert "--mysql-storage-engine=ROCKSDB" in prep
    with pytest.raises(SuiteError, match="sysbench cannot drive mongodb"):
        level_argv("w.lua", MONGO.target({"host": "h", "port": 1}, "x"), opts, 8, 5)


def test_iibench_opens_the_backend_its_driver_names():
    backend = open_backend(ClientTarget(driver_ref=PG.ref), create_database=True)
    assert isinstance(backend, _Backend) and backend.create_database


class _Cursor:
    def __init__(self, log):
        self.log = log

    def execute(self, sql, args=None):
        self.log.append(sql)

    def fetchall(self):
        return [("t_keyed",)]

    def close(self):
        pass


class _Conn:
    def __init__(self, log):
        self.log = log

    def cursor(self):
        return _Cursor(self.log)

    def close(self):
        pass


def test_the_warmup_scans_in_the_drivers_dialect():
    log: list[str] = []
    scan_tables(lambda: _Conn(log), MYSQL, "db", ["sbtest1"], stock=True)
    assert log == ["SELECT AVG(id) FROM `db`.`sbtest1` FORCE KEY (PRIMARY)"]
    log.clear()
    scan_tables(lambda: _Conn(log), MYSQL, "db", ["t_keyed", "history"], stock=False)
    # the primary-keyed tables are asked first; a table without a primary key is scanned plainly
    assert "information_schema.statistics" in log[0]
    assert log[1:] == [
        "SELECT COUNT(*) FROM `db`.`t_keyed` FORCE KEY (PRIMARY)",
        "SELECT COUNT(*) FROM `db`.`history`",
    ]


def test_mysql_compatible_is_what_the_driver_speaks():
    assert MYSQL_FAMILY.mysql_compatible and not MONGODB.mysql_compatible
    assert MYSQL_FAMILY.driver is MYSQL and MONGODB.driver is MONGO

    class Pg(Family):
        driver = PG

    assert not Pg().mysql_compatible

    class Legacy(Family):  # a plugin written when `sql = True` said "MySQL protocol and SQL"
        sql = True

    assert Legacy().driver is MYSQL and Legacy().mysql_compatible
