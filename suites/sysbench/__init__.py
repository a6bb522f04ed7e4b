"""The sysbench sweep: OLTP_RO and POINT_SELECT levels through our Lua wrapper.

A thin leaf over suites.workload: the stock sysbench scripts do the work unchanged; our wrapper
(mallocsweep.lua) records sysbench's own counters and full latency histogram as JSON records.
"""

from suites.sysbench.histogram import LatencyHistogram
from suites.sysbench.options import WORKLOADS, SysbenchOptions, prepared_statements_needed
from suites.sysbench.runner import prepare, records_path, run_level

__all__ = [
    "WORKLOADS",
    "LatencyHistogram",
    "SysbenchOptions",
    "prepare",
    "prepared_statements_needed",
    "records_path",
    "run_level",
]
