"""iibench: an insert-only load into a table with an ordered primary key and up to three random
secondary indexes, by N concurrent client processes (MySQL family and MongoDB).

Written from the insert benchmark's description (Callaghan's MongoDB allocator study used it with
10 clients and 3 secondary indexes). Modules: spec (settings, schema), rows (values), backend*
(one per server family), client (the per-process loop), level (running one level), latency
(histograms), schema (prepare/count), bench (figures about the load generator itself).
"""
