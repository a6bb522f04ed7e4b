"""Read-while-writing (Symas 2015, "readwhilewriting"): a measured load of batched sequential
inserts, then 1 writer updating random rows and N readers reading random rows, unthrottled, until
every reader has read as many rows as the table holds.

Why our own client (mysqlclient's C driver, one process per client) and not a sysbench Lua script
with thread 0 writing: measured, sysbench is cheaper, ours is the one that measures what the
study reports.
- Cost, measured here (2-core VM, MariaDB 10.11.19, 20,000 rows of 4,000 bytes, 2 clients x
  20,000 random point reads, 3 alternating rounds): sysbench 1.0.20 with a 10-line Lua script
  used 10.0-12.5 us of client CPU per read (whole process, start-up included); our reader loop
  17-19 us (loop only; sys time equal, ~7 us: the socket I/O). Before latencies were bucketed
  (suites.workloads.rww.latency) it was ~26 us: HdrHistogram's record_value alone cost ~15 us from Python.
  So on this 2-core machine our clients take ~1.6x the CPU sysbench would, CPU the server
  does not get: throughput here is lower than sysbench would drive. The server's own CPU and
  context switches per operation are measured on the server process, not affected by this.
- Accuracy: sysbench 1.0.20 keeps one event counter and one latency histogram for all threads,
  so write and read rates and percentiles could not be told apart (the study reports Write and
  Read ops/s separately), and its per-thread Lua states share nothing, so "stop when every
  reader has read N rows" has no place to be decided. Here each client has its own counter
  (shared memory, read once per interval) and its own histogram, and the runner ends the level
  when the last reader is done.

Modules: spec (settings, limits per engine), schema (the table), client (the per-process loops),
level (running one level).
"""
