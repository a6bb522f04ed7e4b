"""Read-while-writing (Symas 2015): a measured load of batched sequential inserts, then 1 writer
and N readers until every reader has read as many rows as the table holds (suites/workloads/rww)."""

from __future__ import annotations

from pydantic import Field, model_validator

from suites.config.errors import FieldError
from suites.config.settings import Section
from suites.workloads.base import Workload
from suites.workloads.rww.run_level import LOAD, RUN, WORKLOAD, run_level
from suites.workloads.rww.schema import prepare
from suites.workloads.rww.spec import RwwSettingError, RwwSpec, load_statement_bytes


class RwwSection(Section):
    # Types here; ranges and the rules across fields live once, in RwwSpec.
    records: int = Field(
        20_000,
        description="Rows loaded, then read by every reader (Symas: 2,000,000 of 4,000 bytes).",
    )
    value_bytes: int = Field(
        4000, description="Bytes of each row's value (Symas: 4,000); at most the engine's limit."
    )
    batch_rows: int = Field(100, description="Rows per INSERT (one transaction) in the load.")
    readers: int = Field(
        16, description="Reader clients beside the one writer (Symas: 16); at least 1."
    )
    max_seconds: float = Field(
        300,
        description="Time cap of the read-while-writing level: it stops when every reader has "
        "read `records` rows or after this long (a level cut by the cap is marked in the results).",
    )
    load_max_seconds: float = Field(600, description="Time cap of the load level.")
    report_interval_s: float = Field(1.0, description="Interval reports (timeline, windows).")
    seed: int = Field(1, description="Seed of the random keys and values.")

    def to_spec(self, engine: str | None = "innodb"):

        return RwwSpec(
            records=self.records,
            value_bytes=self.value_bytes,
            batch_rows=self.batch_rows,
            readers=self.readers,
            max_seconds=self.max_seconds,
            load_max_seconds=self.load_max_seconds,
            report_interval_s=self.report_interval_s,
            seed=self.seed,
            engine=engine,
        )

    @model_validator(mode="after")
    def _spec(self):

        # The engine's own limits are checked for each engine of the suite (ReadWhileWriting.check_limits);
        # here only what is wrong whatever the engine (engine None).
        try:
            self.to_spec(None)
        except RwwSettingError as e:
            raise FieldError(("rww", e.field), e.reason, e.value) from None
        return self


class ReadWhileWriting(Workload):
    kind = "rww"
    summary = "read-while-writing (a measured load, then 1 writer + N readers; [rww])"
    database = "rww"
    sections = {"rww": RwwSection}
    clients_field = (("rww", "readers"), "readers + 1 writer")
    options = {
        "threads": "--threads applies to sysbench suites; set [rww] readers instead",
        "duration": ("rww", "max_seconds"),
    }

    def max_clients(self, suite) -> int:
        return suite.rww.readers + 1

    def check_family(self, suite, family) -> None:
        if not family.mysql_compatible:
            raise FieldError(
                ("suite", "kind"), "read-while-writing runs on MySQL-family servers (SQL tables)"
            )

    def check_limits(self, suite, family) -> None:
        # Per engine: a row larger than the engine stores, or a load batch above the packet limit,
        # would fail at the first CREATE TABLE or INSERT, after servers had started.

        for engine in family.engines(suite.server):
            try:
                suite.rww.to_spec(engine)
            except RwwSettingError as e:
                raise FieldError(("rww", e.field), e.reason, e.value) from None
        r = suite.rww
        need = load_statement_bytes(r.batch_rows, r.value_bytes)
        limit, _ = family.statement_limit(suite.server)
        if limit is not None and need > limit:
            raise FieldError(
                ("rww", "batch_rows"),
                f"one load INSERT of {r.batch_rows} rows of {r.value_bytes} bytes takes up to "
                f"{need:,} bytes, above the server's max_allowed_packet ({limit:,} bytes); "
                "lower batch_rows or set server.settings.max_allowed_packet",
            )

    def phases(self, ctx):
        spec = ctx.suite.rww.to_spec(ctx.engine)
        target = ctx.target()
        for phase_kind, clients, cap in (
            (LOAD, 1, spec.load_max_seconds),
            (RUN, spec.clients, spec.max_seconds),
        ):
            phase = f"{WORKLOAD[phase_kind]}@{clients}"

            def run(phase_kind=phase_kind, phase=phase, cap=cap):
                ctx.progress(phase, cap)
                return run_level(
                    target, spec, phase_kind, ctx.logs / f"{phase}.log", ctx.on_interval
                )

            yield phase, run

    def clock(self, suite):
        # Like iibench: the last report comes when the last operation has returned.
        return None, float(suite.rww.report_interval_s), True

    def warmup(self, ctx):
        prepare(ctx.target(), ctx.suite.rww.to_spec(ctx.engine))
        return {"kind": "rww", "note": "the load level starts from an empty table; no warmup"}

    def estimate_cell_seconds(self, suite) -> float:
        # For the ETA only: the levels end when their work is done, so the caps are far above
        # what they take. Rates seen on this 2-core VM (4,000-byte rows): ~3,000 rows/s loaded,
        # ~8,000 reads/s in all, ~0.5 s to start each client process.
        r = suite.rww
        load = min(r.load_max_seconds, r.records / 3000)
        mixed = min(r.max_seconds, r.readers * r.records / 8000)
        return load + mixed + 0.5 * (r.readers + 2)
