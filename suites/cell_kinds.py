"""The leaves: a cell on a MySQL-family server (sysbench sweep or iibench) and on MongoDB (iibench).

Each overrides only what differs — how the server is made, where its data comes from, what the
clients connect to, and which levels run (sysbench's oltp_common.lua + thin leaves, in Python).
"""

from __future__ import annotations

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
        prepared_statements=prepared_statements(suite),
        extra={k: str(v) for k, v in suite.server.settings.items()},
    )


def prepared_statements(suite) -> int:
    """What the largest level's clients hold at once, so max_prepared_stmt_count never caps a level."""
    if suite.suite.kind != "sysbench":
        return 0
    from suites.sysbench import prepared_statements_needed

    s = suite.sysbench
    return max(
        prepared_statements_needed(w, max(s.threads), suite.dataset.tables, s.ps_mode)
        for w in s.workloads
    )


class _Levels:
    """Shared level loops; `self` is a CellRunner with target() and ctx."""

    def sysbench_levels(self):
        from suites import sysbench

        s = self.ctx.suite.sysbench
        opts = sysbench_options(self.ctx.suite)
        target = self.target()
        for workload in s.workloads:
            for threads in s.threads:
                phase = f"{workload}@{threads}"
                log = self.logs / f"{phase}.log"

                def run(workload=workload, threads=threads, log=log, phase=phase):
                    self._progress(phase, s.duration_s)
                    return sysbench.run_level(
                        target,
                        workload,
                        threads,
                        s.duration_s,
                        opts,
                        log,
                        on_interval=self.on_interval,
                        timeout_s=None,
                    )

                yield phase, run

    def iibench_levels(self):
        from suites import iibench

        spec = iibench_spec(self.ctx.suite, self.plan.engine)
        target = self.target()
        phase = f"iibench@{spec.clients}"

        def run():
            self._progress(phase, spec.max_seconds or 60)
            return iibench.run_level(
                target, spec, self.logs / f"{phase}.log", on_interval=self.on_interval
            )

        yield phase, run

    def rww_levels(self):
        from suites import rww

        spec = self.ctx.suite.rww.to_spec(self.plan.engine)
        target = self.target()
        for phase_kind, clients, cap in (
            (rww.LOAD, 1, spec.load_max_seconds),
            (rww.RUN, spec.clients, spec.max_seconds),
        ):
            phase = f"{rww.WORKLOAD[phase_kind]}@{clients}"

            def run(phase_kind=phase_kind, phase=phase, cap=cap):
                self._progress(phase, cap)
                return rww.run_level(
                    target, spec, phase_kind, self.logs / f"{phase}.log", self.on_interval
                )

            yield phase, run

    def level_clock(self) -> tuple[float | None, float | None, bool]:
        suite = self.ctx.suite
        if suite.suite.kind == "rww":
            # Like iibench: the last report comes when the last operation has returned.
            return None, float(suite.rww.report_interval_s), True
        if suite.suite.kind == "sysbench":
            return float(suite.sysbench.duration_s), float(suite.sysbench.report_interval_s), False
        # iibench brackets its load with reports: t=0 when its clock starts, and a final one when
        # the last insert has returned, before any client disconnects (suites.iibench.level).
        return None, float(iibench_spec(suite).report_interval_s), True

    def warmup_throughput(self, t: float, tps: float, qps: float) -> None:
        """Warmup intervals go to the timeline only (no measured window: nothing is per-op)."""
        if self.collectors is not None:
            self.collectors.set_throughput(tps, qps)


def sysbench_options(suite, engine: str = "innodb"):
    from servers.engines import SQL_NAME
    from suites.sysbench import SysbenchOptions

    s = suite.sysbench
    return SysbenchOptions(
        storage_engine=SQL_NAME[engine],
        tables=suite.dataset.tables,
        table_size=suite.dataset.table_size,
        report_interval_s=s.report_interval_s,
        rate=s.rate,
        ps_mode=s.ps_mode,
    )


def iibench_spec(suite, engine: str = "innodb"):
    """The suite's iibench level, built by the one constructor config validation uses."""
    return suite.iibench.to_spec(engine)


class MySQLCell(_Levels, CellRunner):
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
        return MySQLServer(
            self.ctx.server_binary,
            self.work,
            mysql_settings(self.ctx.suite, engine=self.plan.engine),
            self.ctx.allocator,
            thp_disable=thp_disable,
            extra_preload=extra,
        )

    def target(self) -> ClientTarget:
        info = self.server.client_target()
        db = {"iibench": "iibench", "rww": "rww"}.get(self.ctx.suite.suite.kind, "sbtest")
        return ClientTarget.mysql(info, db)

    def status_source(self):
        return self.server.global_status

    def live_status_source(self):
        return self.server.connection_status

    def warmup(self) -> dict | None:
        suite = self.ctx.suite
        if suite.suite.kind == "rww":
            from suites import rww

            rww.prepare(self.target(), suite.rww.to_spec(self.plan.engine))
            return {"kind": "rww", "note": "the load level starts from an empty table; no warmup"}
        if suite.suite.kind == "iibench":
            from suites import iibench

            iibench.prepare(self.target(), iibench_spec(suite, self.plan.engine))
            return {"kind": "iibench", "note": "insert load starts from an empty table; no warmup"}
        from suites.warmup import warm_up

        w = suite.warmup
        self._progress("warmup", w.cap_s)
        return warm_up(
            self.server.connect,
            self.target(),
            suite.dataset.tables,
            sysbench_options(suite),
            cap_s=w.cap_s,
            min_s=w.min_s,
            log_dir=self.logs,
            status_fn=self.server.global_status,
            scan=w.scan,
            threads=w.threads,
            on_interval=self.warmup_throughput,
        )

    def workload_phases(self):
        if self.ctx.suite.suite.kind == "rww":
            return self.rww_levels()
        if self.ctx.suite.suite.kind == "iibench":
            return self.iibench_levels()
        return self.sysbench_levels()


class MongoCell(_Levels, CellRunner):
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

    def warmup(self) -> dict | None:
        from suites import iibench

        iibench.prepare(self.target(), iibench_spec(self.ctx.suite))
        return {"kind": "iibench", "note": "insert load starts from an empty collection; no warmup"}

    def workload_phases(self):
        return self.iibench_levels()
