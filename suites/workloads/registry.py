"""The workload plugins, by the suite kind that names them (`[suite] kind`).

Adding a workload: a module here with a suites.workloads.base.Workload subclass that declares its
settings sections, options and limits (suites/suite/model.py builds the Suite model from them), one
line in REGISTRY, its lines in configs/suites/template.toml, and its tests (docs/architecture.md).
"""

from __future__ import annotations

from suites.errors import SuiteError
from suites.workloads.base import Workload
from suites.workloads.fragmentation.plugin import Fragmentation
from suites.workloads.iibench.plugin import IIBench
from suites.workloads.rww.plugin import ReadWhileWriting
from suites.workloads.sysbench.plugin import Sysbench

REGISTRY: dict[str, Workload] = {
    w.kind: w for w in (Sysbench(), IIBench(), ReadWhileWriting(), Fragmentation())
}


def workload(kind: str) -> Workload:
    """The plugin of a suite kind; SuiteError naming the kinds there are."""
    try:
        return REGISTRY[kind]
    except KeyError:
        raise SuiteError(
            f"suite.kind {kind!r}: no such workload ({', '.join(sorted(REGISTRY))})"
        ) from None


def of(suite) -> Workload:
    """The workload plugin of a loaded suite."""
    return workload(suite.suite.kind)


__all__ = ["REGISTRY", "Workload", "of", "workload"]
