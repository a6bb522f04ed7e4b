"""The client host's share of each level, beside the server's: was the load generator the limit?

Only for runs whose clients ran on their own host ([clients] hosts; results.csv client_* columns).
Both sides cover the same span, the whole level phase (clients connecting and disconnecting
included): the server's CPU from the collectors' phase figures in the manifest, the client
host's from its /proc at the same boundaries. A client host busy near 100% means the figures
measure the load generator as much as the server.
"""

from __future__ import annotations

from analysis.table_model import Cell, Table, count, num, text
from rundir.read import Run

EXPLAIN = (
    "Per level (whole level phase, clients' connecting included): the server process's CPU "
    "seconds (user+system) beside the client host's — all of its CPUs, user+system — and "
    "sysbench's own CPU there, the client host's busy share of its CPUs, its context switches and "
    "its network traffic (kB received/sent, loopback excluded). A client host near 100% busy was "
    "the limit, not the server."
)


def _sum(a, b):
    return None if a is None or b is None else a + b


def client_table(run: Run) -> Table | None:
    rows = [r for r in run.rows if r.get("client_host")]
    if not rows:
        return None
    clients = run.manifest.get("clients") or {}
    t = Table(
        key="client-host",
        title=f"Client host {clients.get('host') or rows[0]['client_host']}: its CPU beside the server's",
        explain=EXPLAIN,
        columns=[
            "cell", "level", "QPS", "server CPU s", "client host CPU s", "sysbench CPU s",
            "client busy %", "client ctx switches", "client rx kB", "client tx kB",
        ],
    )  # fmt: skip
    for r in rows:
        phase = f"{r['workload']}@{r['threads']}"
        cell = run.cells.get(r["cell"]) or {}
        fig = (((cell.get("collectors") or {}).get("phases") or {}).get(phase)) or {}
        t.rows.append(
            [
                text(r["cell"]),
                text(phase),
                num(r.get("qps")),
                num(_sum(fig.get("cpu_user_s"), fig.get("cpu_sys_s"))),
                num(_sum(r.get("client_cpu_user_s"), r.get("client_cpu_sys_s"))),
                num(_sum(r.get("client_sysbench_user_s"), r.get("client_sysbench_sys_s"))),
                num(r.get("client_cpu_busy_pct")),
                count(r.get("client_ctxsw")),
                num(r.get("client_net_rx_kb")),
                num(r.get("client_net_tx_kb")),
            ]
        )
    # One client host, or several (each level's threads split over them; the columns summed).
    for host in clients.get("hosts") or [clients]:
        clock = host.get("clock_at_start") or {}
        if clock:
            t.notes.append(
                f"Client {host.get('host', '')} clock offset "
                f"{clock.get('offset_s', 0) * 1000:+.2f} ms "
                f"(±{clock.get('uncertainty_s', 0) * 1000:.2f} ms, {clock.get('method')}); "
                f"{host.get('sysbench_version', '')} on {host.get('cpus', '?')} CPUs."
            )
    if clients.get("hosts"):
        t.notes.append(
            "Each level's threads were split over these hosts; client figures are their sums."
        )
    return t


__all__ = ["Cell", "client_table"]
