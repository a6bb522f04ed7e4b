"""Thread churn: the sysbench levels run in cycles (e.g. 8 -> 1536 -> 8 -> 1536 ... -> 8), so that
clients connect and leave again and again, once per thread_cache_size ([memory] churn_cycles,
churn_thread_cache).

Why: a server thread that exits leaves its allocator state behind — glibc's arena (arenas are
reused, never freed), tcmalloc's thread cache (returned to the central lists), jemalloc's tcache
(flushed) — and a thread that starts builds it again. With thread_cache_size at the top level
the server keeps its threads and the cycles measure reuse; with a small one they really exit and
start, which is where glibc's per-thread arenas are known to bloat. RSS at the end of each level,
against the cycle, shows growth per cycle; the timeline's thread count shows the threads leaving.

The thread cache sizes run one after the other in one server life, in the order given (SET
GLOBAL thread_cache_size is dynamic): what a later block starts from is what the earlier one
left, so put the setting to study for growth first, or run one value per suite.

Each level's phase is "<workload>@<threads>#c<cycle>" (+ "/tc<size>" when sizes are given); its
results row carries churn_cycle and thread_cache_size.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChurnLevel:
    phase: str
    workload: str
    threads: int
    cycle: int  # 1..cycles; cycles + 1 for the closing level
    thread_cache: int | None  # None: the server's own setting
    first_of_block: bool  # the first level under this thread cache size (SET GLOBAL before it)


def churn_plan(
    workloads: list[str], threads: list[int], cycles: int, caches: list[int]
) -> list[ChurnLevel]:
    """Every level of a churn run, in order."""
    out: list[ChurnLevel] = []
    for workload in workloads:
        for tc in caches or [None]:
            tag = "" if tc is None else f"/tc{tc}"
            block: list[tuple[int, int]] = [(c, t) for c in range(1, cycles + 1) for t in threads]
            block.append((cycles + 1, threads[0]))  # back down: the closing low level
            for n, (cycle, t) in enumerate(block):
                out.append(
                    ChurnLevel(
                        phase=f"{workload}@{t}#c{cycle}{tag}",
                        workload=workload,
                        threads=t,
                        cycle=cycle,
                        thread_cache=tc,
                        first_of_block=n == 0,
                    )
                )
    return out


def set_thread_cache(connect, size: int) -> None:
    """SET GLOBAL thread_cache_size on the running server (MariaDB and MySQL: dynamic)."""
    conn = connect()
    try:
        cur = conn.cursor()
        cur.execute(f"SET GLOBAL thread_cache_size = {int(size)}")
        cur.close()
    finally:
        conn.close()


def server_thread_cache(connect) -> int | None:
    """The thread_cache_size the running server has (what churn levels without a size of their
    own run under); None when it does not say."""
    conn = connect()
    try:
        cur = conn.cursor()
        cur.execute("SHOW GLOBAL VARIABLES LIKE 'thread_cache_size'")
        row = cur.fetchone()
        cur.close()
    finally:
        conn.close()
    try:
        return int(row[1]) if row else None
    except (TypeError, ValueError):
        return None


def row_columns(level: ChurnLevel, server_thread_cache: int | None) -> dict:
    """The results.csv columns a churn level adds to its row."""
    tc = level.thread_cache if level.thread_cache is not None else server_thread_cache
    return {"churn_cycle": level.cycle, "thread_cache_size": tc}
