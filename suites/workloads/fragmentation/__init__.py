"""Memory the way production loses it: fragmentation scenarios from real reports, each a cycle
repeated many times inside one server life, so that RSS growth per cycle can be measured
(`[suite] kind = "fragmentation"`, configs/suites/fragmentation.toml).

The scenarios (suites/workloads/fragmentation/scenarios.py), in the order a suite lists them, all
in one server life, each starting from what the one before left:

- dump (MDEV-30889: a nightly mariadb-dump fragmented the heap until the server died; tcmalloc
  fixed it, jemalloc did not; mariadb-operator #1808: RSS up after each backup until jemalloc
  with background_thread and 5 s decays): a full logical dump of the sysbench tables by the
  server's own dump client, to a file in the cell's work dir (removed after), while a background
  sysbench oltp_read_write load runs;
- session_churn: short sessions, each with its own sort/join/temporary-table buffer sizes, N
  prepared statements, a filesort, a GROUP BY and a join, then a disconnect; under a small and
  under the sized thread cache (one block of cycles each);
- table_cache: thousands of small tables read at random, well beyond table_open_cache and
  table_definition_cache (set for the scenario, put back after);
- fulltext (MySQL bug 95065 / Percona PS-5312: a fulltext query builds an ~80 MB heap of small
  blocks): an InnoDB FULLTEXT index and a mix of natural-language, boolean and phrase queries;
- spike (a burst at the largest client count, then idle): what of the burst's RSS comes back,
  and how soon (rundir.derive.scenario).

Every cycle is a level of its own (phase "<scenario>#c<k>"): its end is a phase boundary, where
RSS is taken apart by mapping (collectors/smaps.py), the allocator's own figures are read
(servers/allocstats.py) and the server's own account too (server_memory_used_kb). What a cycle
did is its level's `scenario` record (rundir.records.ScenarioLevel); growth per cycle and the
verdicts are analysis/growth.py's.
"""
