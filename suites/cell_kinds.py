"""The leaves: a cell on a MySQL-family server and on MongoDB.

Each overrides only what its server family does differently — how the server is made, where its
data comes from, what the clients connect to, where its status is read. What runs on it (levels,
clock, warmup) is the suite's workload plugin (suites/workloads/), the same for every family.
"""

from __future__ import annotations

from suites import workloads
from suites.cell import CellRunner
from suites.workload import ClientTarget


def mysql_settings(suite, max_threads: int | None = None, engine: str = "innodb"):
    from servers.mysql import MySQLSettings

    return MySQLSettings(
        engine=engine,
        rocksdb_block_cache_mb=suite.server.rocksdb_block_cache_mb,
        rocksdb_write_buffer_mb=suite.server.rocksdb_write_buffer_mb,
        buffer_pool_mb=suite.server.buffer_pool_mb,
        max_threads=max_threads or suite.max_threads,
        # What the largest level's clients hold at once, so max_prepared_stmt_count never caps it.
        prepared_statements=workloads.of(suite).prepared_statements(suite),
        extra={k: str(v) for k, v in suite.server.settings.items()},
    )


class WorkloadCell(CellRunner):
    """A cell whose levels, clock and warmup are its suite's workload plugin's."""

    @property
    def workload(self) -> workloads.Workload:
        return workloads.of(self.ctx.suite)

    def workload_phases(self):
        return self.workload.phases(self)

    def level_clock(self) -> tuple[float | None, float | None, bool]:
        return self.workload.clock(self.ctx.suite)

    def warmup(self) -> dict | None:
        return self.workload.warmup(self)

    def warmup_throughput(self, t: float, tps: float, qps: float) -> None:
        """Warmup intervals go to the timeline only (no measured window: nothing is per-op)."""
        if self.collectors is not None:
            self.collectors.set_throughput(tps, qps)


class MySQLCell(WorkloadCell):
    def prepare_datadir(self) -> dict:
        ds = self.ctx.dataset
        return ds.cache.restore(ds.key, self.work / "datadir")

    def make_server(self, thp_disable: bool):
        from servers.mysql import MySQLServer

        extra = ()
        if self.ctx.suite.thp.keep_server_thp:
            from servers.thpshim import keep_thp_library

            extra = (str(keep_thp_library()),)
            self.record["experiment"] = (
                "keep_server_thp: a preload shim ignored the server's prctl(PR_SET_THP_DISABLE), "
                "so the system THP mode reached its heap; MariaDB's own behaviour was changed"
            )
        clients = self.ctx.suite.clients
        late, env = (), {}
        if self.ctx.suite.memory.alloc_stats:
            from servers.allocstats import AllocStats

            self.alloc_stats = AllocStats(self.work)
            lib, env = self.alloc_stats.prepare()
            late = (lib,)
        return MySQLServer(
            self.ctx.server_binary,
            self.work,
            mysql_settings(self.ctx.suite, engine=self.plan.engine),
            self.ctx.allocator,
            thp_disable=thp_disable,
            extra_preload=extra,
            bind_address=clients.server_address if clients.hosts else "127.0.0.1",
            late_preload=late,
            extra_env=env,
        )

    def target(self) -> ClientTarget:
        return ClientTarget.mysql(self.server.client_target(), self.workload.database)

    def remote_target(self) -> ClientTarget:
        """Where a client host connects: TCP to the bound address, as an account of this server
        life only (a fresh random password per cell; root is local-only)."""
        from suites.remote.account import client_account

        user, password = client_account(self.server.connect, self.workload.database)
        info = self.server.client_target()
        return ClientTarget(
            kind="mysql",
            host=info["host"],
            port=info["port"],
            socket=None,
            user=user,
            password=password,
            database=self.workload.database,
        )

    def status_source(self):
        return self.server.global_status

    def live_status_source(self):
        return self.server.connection_status


class MongoCell(WorkloadCell):
    def prepare_datadir(self) -> dict:
        return {"method": "empty", "seconds": 0.0}

    def make_server(self, thp_disable: bool):
        from servers.mongodb import MongoServer

        return MongoServer(
            self.ctx.server_binary,
            self.work,
            self.ctx.suite.server.cache_gb,
            self.ctx.allocator,
            thp_disable=thp_disable,
        )

    def target(self) -> ClientTarget:
        info = self.server.client_target()
        return ClientTarget(
            kind="mongodb", host=info["host"], port=info["port"], database="iibench"
        )

    def status_source(self):
        return self.server.server_status
