"""What the reader says about each workload a run recorded: its description, what its figures
count, and which tables and plots fit it.

analysis/ reads run directories only and never imports the runner's workload plugins (DESIGN:
dependencies point one way), and runs written by earlier versions record nothing but a workload's
name. So the reader's words for the names runs record are declared here, once, instead of as
`if workload == "iibench"` branches across the tables, plots and report. A workload this module
does not know gets the generic words (operations, transactions): it is still reported, only in
plainer language.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# An insert load's qps is rows inserted per second, its tps insert batches per second.
INSERT_LABELS = MappingProxyType({"qps": "rows inserted/s", "tps": "insert batches/s"})
# Read-while-writing's run level: an operation is one statement, a read or a write.
RWW_RUN_LABELS = MappingProxyType({"qps": "operations/s (reads + writes)", "tps": "writes/s"})


@dataclass(frozen=True)
class Words:
    description: str = ""
    metric_labels: Mapping[str, str] = field(default_factory=dict)  # over the generic labels
    timed: str = "transactions"  # what one latency sample times
    op: str = "query"  # the unit of the per-operation cost tables
    ops: str = "queries"
    rate_unit: str = "operations/s"  # the per-interval rate plot's axis
    # One long level (no thread sweep): plot rates over the level, not against threads.
    one_long_level: bool = False
    # Callaghan's insert-benchmark table (cost per 1M inserted rows, duration, memory).
    insert_table: bool = False
    # The suite section whose settings are the load (it builds its own table), if not [dataset].
    load_section: str | None = None
    # A fragmentation scenario (suites/workloads/fragmentation): cycles at one client count, so
    # no plot against threads; its memory per cycle is analysis/fragmentation.py's.
    scenario: bool = False


GENERIC = Words()

WORDS: Mapping[str, Words] = MappingProxyType(
    {
        "oltp_ro": Words(
            "sysbench OLTP read-only: each transaction runs 10 primary-key lookups and 4 range"
            " queries (14 queries) inside BEGIN/COMMIT. It stresses the server's per-connection"
            " and per-query memory allocation under many concurrent clients."
        ),
        "point_select": Words(
            "sysbench point select: one primary-key lookup per transaction — the cheapest query,"
            " so allocator and mutex overheads form a large share of each query's cost."
        ),
        "iibench": Words(
            "iibench insert benchmark: concurrent clients insert rows in batches into an indexed"
            " table; the cost is measured per million inserted rows.",
            INSERT_LABELS,
            timed="insert batches",  # iibench times each batch (one multi-row INSERT)
            op="inserted row",
            ops="rows",
            rate_unit="rows inserted/s",
            one_long_level=True,
            insert_table=True,
            load_section="iibench",
        ),
        # The read-while-writing suite kind (its levels are rww_load and rww_run): only for the
        # run's header, whose load is the [rww] section (the suite has no [dataset]).
        "rww": Words(
            "read-while-writing (Symas 2015): a load, then 1 writer and N readers.",
            load_section="rww",
        ),
        "rww_load": Words(
            "read-while-writing, load: one client inserts every row in key order, in batches"
            " (one multi-row INSERT each); ops are rows.",
            INSERT_LABELS,
        ),
        "rww_run": Words(
            "read-while-writing (Symas 2015): 1 writer updates random rows while the readers read"
            " random rows, unthrottled, until every reader has read as many rows as the table"
            " holds; ops are statements (reads + writes).",
            RWW_RUN_LABELS,
        ),
        # The fragmentation scenarios' levels: one per cycle, each with a sysbench load.
        "dump": Words(
            "fragmentation scenario after MDEV-30889 and mariadb-operator #1808: each cycle a"
            " full logical dump of the sysbench tables by the server's own dump client, while"
            " sysbench oltp_read_write runs beside it (its transactions are the figures here).",
            scenario=True,
        ),
        "session_churn": Words(
            "fragmentation scenario: each transaction is a whole client session (connect, its own"
            " sort/join/temporary-table buffer sizes, prepared statements, a filesort, a GROUP BY"
            " and a join, disconnect); the suffix is the thread_cache_size (sized: threads kept).",
            timed="sessions",
            scenario=True,
        ),
        "table_cache": Words(
            "fragmentation scenario: point reads of thousands of small tables at random, beyond"
            " table_open_cache and table_definition_cache.",
            scenario=True,
        ),
        "fulltext": Words(
            "fragmentation scenario after MySQL bug 95065 / PS-5312: natural-language, boolean"
            " and phrase queries over an InnoDB FULLTEXT index.",
            scenario=True,
        ),
        "spike": Words(
            "fragmentation scenario: a burst at the largest client count, then idle; what of the"
            " burst's RSS comes back.",
            scenario=True,
        ),
    }
)


def words(workload: str) -> Words:
    """The words for a recorded workload; a session-churn block (session_churn_tc4) is read as
    session_churn."""
    found = WORDS.get(workload)
    if found is None and "_tc" in workload:
        found = WORDS.get(workload.rsplit("_tc", 1)[0])
    return found or GENERIC
