"""The sysbench sweep: OLTP workloads × client thread counts, each level `duration_s` long, on a
prepared sbtest dataset, after a buffer-pool warmup."""

from __future__ import annotations

from suites.workloads.base import Workload

# On-disk size of a sysbench row with InnoDB overhead (page fill, secondary index on k).
SYSBENCH_ROW_BYTES = 230


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


class Sysbench(Workload):
    kind = "sysbench"
    database = "sbtest"

    def phases(self, cell):
        from suites import sysbench

        s = cell.ctx.suite.sysbench
        if cell.ctx.suite.memory.churn_cycles:
            yield from self.churn_phases(cell)
            return
        opts = sysbench_options(cell.ctx.suite, cell.plan.engine)
        remote = cell.ctx.clients  # suites.remote.clients.RemoteClients, or None: clients run here
        target = cell.remote_target() if remote is not None else cell.target()
        for workload in s.workloads:
            for threads in s.threads:
                phase = f"{workload}@{threads}"
                log = cell.logs / f"{phase}.log"

                def run(workload=workload, threads=threads, log=log, phase=phase):
                    cell._progress(phase, s.duration_s)
                    before = remote.load() if remote is not None else None
                    res = sysbench.run_level(
                        target,
                        workload,
                        threads,
                        s.duration_s,
                        opts,
                        log,
                        on_interval=cell.on_interval,
                        timeout_s=None,
                        remote=remote,
                    )
                    if remote is not None:
                        # the client host's own CPU, context switches and network over the level
                        res.extra["client_load"] = remote.level_load(before)
                    return res

                yield phase, run

    def churn_phases(self, cell):
        """The sysbench levels in cycles (suites.churn): clients come and go, threads exit."""
        from suites import churn, sysbench

        suite = cell.ctx.suite
        s, mem = suite.sysbench, suite.memory
        opts = sysbench_options(suite, cell.plan.engine)
        target = cell.target()
        own = cell.server.settings.thread_cache_size
        for lv in churn.churn_plan(
            s.workloads, s.threads, mem.churn_cycles, mem.churn_thread_cache
        ):

            def run(lv=lv):
                if lv.first_of_block and lv.thread_cache is not None:
                    churn.set_thread_cache(cell.server.connect, lv.thread_cache)
                cell._progress(lv.phase, s.duration_s)
                res = sysbench.run_level(
                    target,
                    lv.workload,
                    lv.threads,
                    s.duration_s,
                    opts,
                    cell.logs / f"{lv.phase.replace('/', '_')}.log",
                    on_interval=cell.on_interval,
                    timeout_s=None,
                )
                res.extra["row"] = churn.row_columns(lv, own)
                return res

            yield lv.phase, run

    def clock(self, suite):
        return float(suite.sysbench.duration_s), float(suite.sysbench.report_interval_s), False

    def warmup(self, cell):
        from suites.warmup import warm_up

        suite = cell.ctx.suite
        w = suite.warmup
        cell._progress("warmup", w.cap_s)
        return warm_up(
            cell.server.connect,
            cell.target(),
            suite.dataset.tables,
            sysbench_options(suite, cell.plan.engine),
            cap_s=w.cap_s,
            min_s=w.min_s,
            log_dir=cell.logs,
            status_fn=cell.server.global_status,
            scan=w.scan,
            threads=w.threads,
            on_interval=cell.warmup_throughput,
            engine=cell.plan.engine,  # whose cache counters say "warm"
        )

    def prepared_statements(self, suite) -> int:
        from suites.sysbench import prepared_statements_needed

        s = suite.sysbench
        return max(
            prepared_statements_needed(w, max(s.threads), suite.dataset.tables, s.ps_mode)
            for w in s.workloads
        )

    def estimate_cell_seconds(self, suite) -> float:
        warm = suite.warmup.cap_s if suite.warmup.cap_s else 5.0
        s = suite.sysbench
        levels = len(s.workloads) * len(s.threads)
        # Each level also spends time starting its client threads (up to ~1 s per 100 threads).
        init = sum(1 + t / 100 for t in s.threads) * len(s.workloads)
        return warm + levels * s.duration_s + init

    def dataset_spec(self, suite) -> dict:
        return {
            "kind": "sysbench",
            "tables": suite.dataset.tables,
            "table_size": suite.dataset.table_size,
        }

    def prepare_dataset(self, suite, target, logs, engine: str = "innodb", connect=None) -> float:
        from servers.engines import check_tables
        from suites import sysbench

        took = sysbench.prepare(target, sysbench_options(suite, engine), logs / "prepare.log")
        if connect is not None:
            conn = connect()
            try:
                check_tables(conn.cursor(), "sbtest", engine)  # --mysql-storage-engine took
            finally:
                conn.close()
        return took

    def dataset_kb(self, tables: int, table_size: int) -> int:
        return tables * table_size * SYSBENCH_ROW_BYTES // 1024
