"""iibench: an insert-only load into a table with an ordered primary key and up to three random
secondary indexes, by N concurrent client processes (MySQL family and MongoDB).

Written from the insert benchmark's description (Callaghan's MongoDB allocator study used it with
10 clients and 3 secondary indexes). Modules: spec (settings, schema), rows (values), backend (the
interface a family's backend meets: each family keeps its own in its folder and its driver names
it, suites/families/*/iibench_backend.py), connect (open the target's), client (the per-process loop), level (running one level), latency
(histograms), schema (prepare/count), bench (figures about the load generator itself).
"""
