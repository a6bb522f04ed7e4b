"""Read-while-writing (Symas 2015): a measured load of batched sequential inserts, then 1 writer
and N readers until every reader has read as many rows as the table holds (suites/rww)."""

from __future__ import annotations

from suites.workloads.base import Workload


class ReadWhileWriting(Workload):
    kind = "rww"
    database = "rww"

    def phases(self, cell):
        from suites import rww

        spec = cell.ctx.suite.rww.to_spec(cell.plan.engine)
        target = cell.target()
        for phase_kind, clients, cap in (
            (rww.LOAD, 1, spec.load_max_seconds),
            (rww.RUN, spec.clients, spec.max_seconds),
        ):
            phase = f"{rww.WORKLOAD[phase_kind]}@{clients}"

            def run(phase_kind=phase_kind, phase=phase, cap=cap):
                cell._progress(phase, cap)
                return rww.run_level(
                    target, spec, phase_kind, cell.logs / f"{phase}.log", cell.on_interval
                )

            yield phase, run

    def clock(self, suite):
        # Like iibench: the last report comes when the last operation has returned.
        return None, float(suite.rww.report_interval_s), True

    def warmup(self, cell):
        from suites import rww

        rww.prepare(cell.target(), cell.ctx.suite.rww.to_spec(cell.plan.engine))
        return {"kind": "rww", "note": "the load level starts from an empty table; no warmup"}

    def estimate_cell_seconds(self, suite) -> float:
        # For the ETA only: the levels end when their work is done, so the caps are far above
        # what they take. Rates seen on this 2-core VM (4,000-byte rows): ~3,000 rows/s loaded,
        # ~8,000 reads/s in all, ~0.5 s to start each client process.
        r = suite.rww
        load = min(r.load_max_seconds, r.records / 3000)
        mixed = min(r.max_seconds, r.readers * r.records / 8000)
        return load + mixed + 0.5 * (r.readers + 2)
