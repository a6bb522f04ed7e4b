"""The fragmentation scenarios as a workload plugin (`[suite] kind = "fragmentation"`; see the
package doc, suites/workloads/fragmentation/__init__.py)."""

from __future__ import annotations

from suites.config.errors import FieldError
from suites.workloads.base import PreparedData, Workload
from suites.workloads.fragmentation import scenarios
from suites.workloads.fragmentation.dumpclient import find_dump_client
from suites.workloads.fragmentation.settings import SECTIONS
from suites.workloads.sysbench import prepared_statements_needed
from suites.workloads.sysbench import scripts as user_scripts
from suites.workloads.sysbench.dataset import prepare_tables
from suites.workloads.sysbench.options import as_script, stock_tables
from suites.workloads.sysbench.plugin import SYSBENCH_ROW_BYTES
from suites.workloads.sysbench.warm import warm_up_in

# oltp_read_write (the dump's background load) keeps BEGIN, COMMIT and nine statements per table
# prepared per client (oltp_common.lua, --db-ps-mode=auto).
OLTP_RW_PS = (2, 9)
# Disk of one small table of the table-cache scenario (an InnoDB .ibd file of a few pages plus
# its definition), and of a fulltext document with its index, bytes: for the preflight.
SMALL_TABLE_BYTES = 128 * 1024
FULLTEXT_DOC_BYTES = 2048
# Session churn's clients disconnect and connect again at once: a server thread that has not yet
# finished with a closed session still counts as a connection, and on 2 busy cores they pile
# up (MySQL 9.7 here: "Too many connections" with 4 clients and 96 allowed). Connections
# allowed per session client:
SESSION_CONNECTIONS = 32
# Per cycle beside its load: the phase boundary's readings (status, smaps, the allocator's
# figures) and sysbench's start (seconds, for the ETA).
CYCLE_OVERHEAD_S = 1.5


class Fragmentation(Workload):
    kind = "fragmentation"
    summary = "fragmentation scenarios from real reports, cycles repeated in one server life"
    database = "sbtest"
    sections = SECTIONS
    clients_field = (("spike", "threads"), "burst client count")
    options = {
        "threads": "--threads applies to sysbench sweeps; set [spike] threads and each "
        "scenario's threads instead",
        "duration": ("fragmentation", "cycle_s"),
        "soak": ("fragmentation", "soak"),
        "scenarios": ("fragmentation", "scenarios"),
    }
    server_account = True

    def max_clients(self, suite) -> int:
        on = suite.fragmentation.scenarios
        counts = [1]
        if "dump" in on:
            counts.append(suite.dump.background_threads + 1)
        if "session_churn" in on:
            counts.append(suite.session_churn.threads * SESSION_CONNECTIONS)
        if "table_cache" in on:
            counts.append(suite.table_cache.threads)
        if "fulltext" in on:
            counts.append(suite.fulltext.threads)
        if "spike" in on:
            counts.append(suite.spike.threads)
        return max(counts)

    def min_clients(self, suite) -> int:
        return 1

    def check_family(self, suite, family) -> None:
        if not family.mysql_compatible:
            raise FieldError(
                ("suite", "kind"),
                "the fragmentation scenarios run on MySQL-family servers (a dump client, SQL "
                "sessions, FULLTEXT); a MongoDB server, and the tests' MongoDB stand-in, cannot "
                "run them",
            )
        if "fulltext" in suite.fragmentation.scenarios:
            other = [e for e in family.engines(suite.server) if e != "innodb"]
            if other:
                raise FieldError(
                    ("fragmentation", "scenarios"),
                    f"the fulltext scenario needs InnoDB's FULLTEXT index; {other[0]} (MyRocks) "
                    "has none: drop 'fulltext' or run server.engines = [\"innodb\"]",
                    "fulltext",
                )

    def check_server(self, suite, binary) -> None:
        if "dump" in suite.fragmentation.scenarios:
            find_dump_client(binary)

    def phases(self, ctx):
        if ctx.suite.fragmentation.soak:
            yield from scenarios.soak_phases(ctx)  # ended by the soak driver
            return
        for name in ctx.suite.fragmentation.scenarios:
            yield from scenarios.RUNNERS[name](ctx)

    def clock(self, suite):
        # Levels differ (cycle_s, the spike's burst): the window ends at the second-to-last
        # report of each, which the load outlasted.
        return None, float(suite.fragmentation.report_interval_s), False

    def warmup(self, ctx):
        return warm_up_in(
            ctx,
            scenarios.options(ctx.suite, ctx.engine),
            load=as_script("oltp_ro"),
            stock=stock_tables(ctx.suite.dataset.tables),
            own=[],
        )

    def prepared_statements(self, suite) -> int:
        on = suite.fragmentation.scenarios
        tables = suite.dataset.tables
        need = [0]
        if "dump" in on:
            fixed, per_table = OLTP_RW_PS
            need.append(suite.dump.background_threads * (fixed + per_table * tables))
        if "session_churn" in on:
            s = suite.session_churn
            need.append(s.threads * s.statements)
        if "spike" in on:
            s = suite.spike
            need.append(prepared_statements_needed(s.workload, s.threads, tables))
        return max(need)

    def estimate_cell_seconds(self, suite) -> float:
        f = suite.fragmentation
        total = suite.warmup.cap_s if suite.warmup.cap_s else 5.0
        for name in f.scenarios:
            if name == "spike":
                s = suite.spike
                total += s.cycles * (s.burst_s + s.idle_s + CYCLE_OVERHEAD_S + s.threads / 100)
            else:
                blocks = (
                    len(suite.session_churn.thread_cache_sizes) if name == "session_churn" else 1
                )
                total += blocks * f.cycles * (f.cycle_s + CYCLE_OVERHEAD_S)
        return total

    def dataset_spec(self, suite) -> dict:
        spec = {
            "kind": "fragmentation",
            "tables": suite.dataset.tables,
            "table_size": suite.dataset.table_size,
        }
        on = suite.fragmentation.scenarios
        if "table_cache" in on:
            t = suite.table_cache
            spec["table_cache"] = {"tables": t.tables, "rows": t.rows}
        if "fulltext" in on:
            t = suite.fulltext
            spec["fulltext"] = {"docs": t.docs, "words": t.words, "vocabulary": t.vocabulary}
        if "table_cache" in on or "fulltext" in on:
            spec["scripts"] = user_scripts.digest(scenarios.TABLE_CACHE_LUA)
        return spec

    def prepare_dataset(
        self, suite, target, logs, engine: str = "innodb", connect=None
    ) -> PreparedData:
        # the stock sbtest tables (sysbench's own prepare), then each script's own tables
        stock = as_script("oltp_ro")
        took, tables = prepare_tables(
            [stock, *scenarios.dataset_scripts(suite, engine)],
            target,
            scenarios.options(suite, engine),
            logs,
            engine,
            connect,
        )
        return PreparedData(took, tables)

    def dataset_kb(self, suite) -> int:
        on = suite.fragmentation.scenarios
        n = suite.dataset.tables * suite.dataset.table_size * SYSBENCH_ROW_BYTES
        if "table_cache" in on:
            n += suite.table_cache.tables * SMALL_TABLE_BYTES
        if "fulltext" in on:
            n += suite.fulltext.docs * FULLTEXT_DOC_BYTES
        return n // 1024
