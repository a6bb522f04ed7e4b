"""`make bench`: the tool's own performance targets, each measured side by side in one run.

Timings on a shared machine drift, so every figure here is a ratio of two things measured back to
back (or interleaved) in this process, never an absolute time compared with a constant:

1. dataset restore vs sysbench prepare of the same dataset        goal: restore >= 20x faster
2. server start to warm buffer pool vs the fixed 600 s warmup      goal: warm, sooner than 600 s
3. the collectors' CPU (sampler thread + boundary and window marks, the real CollectorSession of a cell)
   as a fraction of one core, while the server holds 1536 client connections
                                                                   goal: <= 1% of a core
4. POINT_SELECT QPS with collectors on vs off at 64 and at 1536 threads, interleaved repeats
   (on/off alternating first), with the run-to-run noise          goal: no change beyond the noise
4b. the context-switch source's cost: POINT_SELECT@64 QPS with the collectors on taskstats (the
   "on" lives of item 4) vs the same collectors on perf counters (lives of their own, in the same
   rotation of on / off / perf)                                   goal: taskstats >= perf - noise
5. iibench: multi-process client insert rate vs a one-process (GIL-bound) baseline
                                                                   goal: >= 1 within the noise
6. iibench client CPU as a fraction of server CPU                  goal: < 1 (client lighter)
7. verdicts: rounds the budgeted sequential design needs to decide a true 10% difference, against
   the fixed 3-round design. A SIMULATION (analysis/simulate.py, the runner's own rule and order)
   at the noise per server life that the newest real run under --out (runs/) measured, with its
   number of allocators; without one, at the recorded noise of tests/fixtures/runs/
   real-regress-base-a and -b with the quick suite's seven allocators. The row says which.
                                                                   goal: found in >= 80% of runs
8. the sweep vs raw sysbench (stock scripts, nothing of ours attached), paired within ONE server
   life in short blocks A B B A ..., per workload and thread level: the ratio with its 95%
   interval over the pairs (bench.paired), and what each source costs at
   POINT_SELECT@8 (raw, + report interval, + wrapper and runner, + collectors)
                                                                   goal: QPS ratio >= 0.98, or
                                                                   "not resolvable" at the noise
9. our iibench vs Callaghan's iibench.py at 1 and 10 clients, levels alternating on one server
                                                                   goal: rows/s >= 1.0x, and
                                                                   client CPU per row lower

10. an upgrade check: the same two builds (an older patch, fetched, and the host's server), the
   same suite and lives, (a) in ONE run, interleaved and paired by round, and (b) in two separate
   runs compared afterwards: the median half-width of the NEW/BASE throughput intervals of each
   design, as a ratio; and the server A/A (one build under two names in one run)
                                                                   goal: in-run narrower; the
                                                                   A/A never called different

The figures live in small modules: bench (items 1-6), paired (8: sweep vs raw sysbench within
one server life), reference (9: iibench vs iibench.py), upgrade (10), table (the printout), main (the steps).

Usage: python -m bench [--quick] [--out DIR] [--iibench-py PATH] [--only FIGS]
                                 [--pairs N] [--upgrade-from SPEC] [--upgrade-rounds N]
"""
