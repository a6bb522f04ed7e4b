"""The sysbench sweep: OLTP_RO and POINT_SELECT levels, or the user's own scripts, through our Lua
wrapper.

A thin leaf over suites.workloads.level_result: the scripts do the work unchanged (sysbench's stock ones, or the
user's: suites.workloads.sysbench.scripts); our wrapper (mallocsweep.lua) records sysbench's own counters
and full latency histogram as JSON records.
"""

from suites.workloads.sysbench.histogram import LatencyHistogram
from suites.workloads.sysbench.options import (
    WORKLOADS,
    Script,
    SysbenchOptions,
    prepared_statements_needed,
)
from suites.workloads.sysbench.records import records_path
from suites.workloads.sysbench.runner import prepare, run_level

__all__ = [
    "WORKLOADS",
    "LatencyHistogram",
    "Script",
    "SysbenchOptions",
    "prepare",
    "prepared_statements_needed",
    "records_path",
    "run_level",
]
