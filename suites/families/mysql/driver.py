"""The MySQL family's driver: the MySQL protocol (mysqlclient, libmariadb underneath; sysbench's
`mysql` driver) and its SQL dialect (backquoted names, ENGINE=, FORCE KEY, information_schema).
What the workloads ask instead of naming the family (suites.families.driver)."""

from __future__ import annotations

from servers.errors import ServerError
from suites.errors import SuiteError
from suites.families.driver import Driver
from suites.families.mysql.engines import SQL_NAME
from suites.families.mysql.engines import check_tables as _check_tables
from suites.target import ClientTarget


class MySQLDriver(Driver):
    name = "mysql"
    ref = "suites.families.mysql.driver:DRIVER"
    iibench_backend = "suites.families.mysql.iibench_backend:MySQLBackend"
    sysbench_driver = "mysql"

    def target(self, info: dict, database: str) -> ClientTarget:
        """From a MySQL-family server's client_target() dict (socket, port, host, user,
        password)."""
        return ClientTarget(
            driver_ref=self.ref,
            host=info.get("host", "127.0.0.1"),
            port=info.get("port", 0),
            socket=info.get("socket"),
            user=info.get("user", "root"),
            password=info.get("password", ""),
            database=database,
        )

    def connect(self, target, *, database: bool = True):
        import MySQLdb  # the client library only where a connection is made

        args = {"user": target.user, "password": target.password, "autocommit": True}
        if target.socket:
            args["unix_socket"] = target.socket
        else:
            args.update(host=target.host, port=target.port)
        if database:
            args["database"] = target.database
        return MySQLdb.connect(**args)

    def sysbench_args(self, target) -> list[str]:
        """The unix socket when there is one (no TCP SYN backlog at 1536 threads)."""
        args = [f"--db-driver={self.sysbench_driver}"]
        if target.socket:
            args.append(f"--mysql-socket={target.socket}")
        else:
            args += [f"--mysql-host={target.host}", f"--mysql-port={target.port}"]
        return [
            *args,
            f"--mysql-user={target.user}",
            f"--mysql-password={target.password}",
            f"--mysql-db={target.database}",
        ]

    def sysbench_prepare_args(self, engine: str) -> list[str]:
        return [f"--mysql-storage-engine={self.engine_sql(engine)}"]

    def engine_sql(self, engine: str) -> str:
        return SQL_NAME[engine]

    def check_tables(self, cur, database: str, engine: str, tables: list[str] | None = None):
        try:
            _check_tables(cur, database, engine, tables)
        except ServerError as e:
            raise SuiteError(str(e)) from None

    def primary_keyed(self, cur, database: str) -> set[str]:
        cur.execute(
            "SELECT DISTINCT table_name FROM information_schema.statistics "
            "WHERE table_schema = %s AND index_name = 'PRIMARY'",
            (database,),
        )
        return {str(r[0]) for r in cur.fetchall()}

    def scan_sql(self, database: str, table: str, stock: bool, keyed: bool) -> str:
        """The classic `SELECT AVG(id) ... FORCE KEY (PRIMARY)` on the stock tables; COUNT(*)
        along the same clustered index on a script's own (no `id` column known), a plain
        COUNT(*) on a table without a primary key (TPC-C's history has none)."""
        what = "AVG(id)" if stock else "COUNT(*)"
        force = " FORCE KEY (PRIMARY)" if keyed else ""
        return f"SELECT {what} FROM `{database}`.`{table}`{force}"


DRIVER = MySQLDriver()
