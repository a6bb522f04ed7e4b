"""iibench: insert-only load (with optional query clients) into an empty table or collection,
one level of `clients` inserters until `max_rows` or `max_seconds`."""

from __future__ import annotations

from suites.workloads.base import Workload


def iibench_spec(suite, engine: str = "innodb"):
    """The suite's iibench level, built by the one constructor config validation uses."""
    return suite.iibench.to_spec(engine)


class IIBench(Workload):
    kind = "iibench"
    database = "iibench"

    def phases(self, cell):
        from suites import iibench

        spec = iibench_spec(cell.ctx.suite, cell.plan.engine)
        target = cell.target()
        phase = f"iibench@{spec.clients}"

        def run():
            cell._progress(phase, spec.max_seconds or 60)
            return iibench.run_level(
                target, spec, cell.logs / f"{phase}.log", on_interval=cell.on_interval
            )

        yield phase, run

    def clock(self, suite):
        # iibench brackets its load with reports: t=0 when its clock starts, and a final one when
        # the last insert has returned, before any client disconnects (suites.iibench.level).
        return None, float(iibench_spec(suite).report_interval_s), True

    def warmup(self, cell):
        from suites import iibench

        iibench.prepare(cell.target(), iibench_spec(cell.ctx.suite, cell.plan.engine))
        return {
            "kind": "iibench",
            "note": "insert load starts from an empty table (collection); no warmup",
        }

    def estimate_cell_seconds(self, suite) -> float:
        spec = suite.iibench
        return spec.max_seconds if spec.max_seconds else 60.0
