"""iibench: insert-only load (with optional query clients) into an empty table or collection,
one level of `clients` inserters until `max_rows` or `max_seconds`."""

from __future__ import annotations

from pydantic import Field, model_validator

from suites.config.errors import FieldError
from suites.config.settings import Section
from suites.workloads.base import Workload
from suites.workloads.iibench.run_level import run_level
from suites.workloads.iibench.schema import prepare
from suites.workloads.iibench.spec import IIBenchSettingError, IIBenchSpec, insert_statement_bytes
from suites.workloads.pylevel import run_remote_level


class IIBenchSection(Section):
    # Types here; the ranges and the rules across fields live once, in IIBenchSpec.
    clients: int = Field(10, description="Concurrent insert clients (separate processes).")
    max_rows: int = Field(
        1_000_000,
        description="Stop after this many rows in all (>= 1; a time-only run sets max_seconds and "
        "a large max_rows).",
    )
    max_seconds: float = Field(0, description="...or after this long (0 = no time limit).")
    batch_rows: int = Field(1000, description="Rows per insert statement / insert_many.")
    secondary_indexes: int = Field(3, description="0-3 secondary indexes.")
    data_length: int = Field(10, description="Length of the data column (0-16000 characters).")
    query_clients: int = Field(
        0, description="Concurrent query clients (they query the first secondary index)."
    )

    def to_spec(self, engine: str = "innodb") -> IIBenchSpec:
        return IIBenchSpec(
            engine=engine,
            clients=self.clients,
            max_rows=self.max_rows,
            max_seconds=self.max_seconds,
            batch_rows=self.batch_rows,
            secondary_indexes=self.secondary_indexes,
            data_length=self.data_length,
            query_clients=self.query_clients,
        )

    @model_validator(mode="after")
    def _spec(self):
        try:
            self.to_spec()
        except IIBenchSettingError as e:
            raise FieldError(("iibench", e.field), e.reason, e.value) from None
        return self


def iibench_spec(suite, engine: str = "innodb"):
    """The suite's iibench level, built by the one constructor config validation uses."""
    return suite.iibench.to_spec(engine)


class IIBench(Workload):
    kind = "iibench"
    summary = "insert load"
    database = "iibench"
    remote_clients = True
    remote_program = "python"
    sections = {"iibench": IIBenchSection}
    clients_field = (("iibench", "clients"), "clients + query_clients")
    options = {
        "threads": "--threads applies to sysbench suites; set [iibench] clients instead",
        "duration": ("iibench", "max_seconds"),
    }

    def max_clients(self, suite) -> int:
        return suite.iibench.clients + suite.iibench.query_clients

    def check_limits(self, suite, family) -> None:
        # A MySQL insert batch is one statement: past max_allowed_packet every batch would fail.
        if not family.mysql_compatible:
            return
        i = suite.iibench
        need = insert_statement_bytes(i.batch_rows, i.data_length)
        limit, given = family.statement_limit(suite.server)
        if limit is not None and need > limit:
            raise FieldError(
                ("iibench", "batch_rows"),
                f"one insert of {i.batch_rows} rows with data_length {i.data_length} takes up to "
                f"{need:,} bytes, above the server's max_allowed_packet ({limit:,} bytes"
                f"{'' if given else ', the default'}); lower batch_rows or "
                "data_length, or set server.settings.max_allowed_packet",
            )

    def phases(self, ctx):
        spec = iibench_spec(ctx.suite, ctx.engine)
        remote = ctx.clients  # suites.remote.clients.RemoteClients, or None: clients run here
        target = ctx.remote_target() if remote is not None else ctx.target()
        phase = f"iibench@{spec.clients}"

        def run():
            ctx.progress(phase, spec.max_seconds or 60)
            log = ctx.logs / f"{phase}.log"
            if remote is None:
                return run_level(target, spec, log, on_interval=ctx.on_interval)
            # the whole level runs there (our agent); its client_load is that host's own
            return run_remote_level(remote, "iibench", target, spec, log, ctx.on_interval)

        yield phase, run

    def clock(self, suite):
        # iibench brackets its load with reports: t=0 when its clock starts, and a final one when
        # the last insert has returned, before any client disconnects (suites.workloads.iibench.run_level).
        return None, float(iibench_spec(suite).report_interval_s), True

    def warmup(self, ctx):
        prepare(ctx.target(), iibench_spec(ctx.suite, ctx.engine))
        return {
            "kind": "iibench",
            "note": "insert load starts from an empty table (collection); no warmup",
        }

    def console_units(self, name: str) -> tuple[str, str]:
        # iibench's qps are rows inserted and its latencies are per insert batch.
        return "rows/s", "p95 ms per batch"

    def estimate_cell_seconds(self, suite) -> float:
        spec = suite.iibench
        return spec.max_seconds if spec.max_seconds else 60.0
