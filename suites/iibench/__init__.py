"""iibench: an insert-only load into a table with an ordered primary key and up to three random
secondary indexes, by N concurrent client processes (MySQL family and MongoDB).

Written from the insert benchmark's description (Callaghan's MongoDB allocator study used it with
10 clients and 3 secondary indexes). Modules: spec (settings, schema), rows (values), backend*
(one per server family), client (the per-process loop), level (running one level), latency
(histograms), schema (prepare/count), bench (figures about the load generator itself).
"""

from suites.iibench.level import PROCESSES, THREADS, run_level
from suites.iibench.schema import count_rows, index_keys, prepare
from suites.iibench.spec import SECONDARY_INDEXES, TABLE, IIBenchSpec

__all__ = [
    "IIBenchSpec",
    "PROCESSES",
    "SECONDARY_INDEXES",
    "TABLE",
    "THREADS",
    "count_rows",
    "index_keys",
    "prepare",
    "run_level",
]
