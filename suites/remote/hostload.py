"""What the client host spent on a level: CPU, context switches and network, from its /proc.

Read over the shared SSH connection at the level's boundaries (one command: /proc/stat,
/proc/net/dev and the remote clock), so the figures cover the whole level phase, clients'
connecting and teardown included. They are the whole client host's (a host that runs only the
load generator), not one process's; sysbench's own CPU comes from the remote shell that waited
for it (sysbench_cpu). /proc/net/dev is the network namespace's of the reader: on a
real host, every interface of the host; loopback is left out.
"""

from __future__ import annotations

import re

from rundir.format import CLIENT_COLUMNS  # noqa: F401 - the columns this module fills

COMMAND = "cat /proc/stat /proc/net/dev && date +%s%N"


def parse(text: str) -> dict:
    """{cpu: [jiffies...], ctxt, rx_bytes, tx_bytes, t_s} from COMMAND's output.

    Lines are told apart by their own form (/proc/stat's `cpu ` and `ctxt`, /proc/net/dev's
    `iface: 16 numbers`, the clock's one integer), never by position.
    """
    out: dict = {"rx_bytes": 0, "tx_bytes": 0}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cpu":
            out["cpu"] = [int(x) for x in parts[1:]]
        elif parts[0] == "ctxt" and len(parts) == 2:
            out["ctxt"] = int(parts[1])
        elif ":" in line and "|" not in line:
            iface, _, rest = line.partition(":")
            nums = rest.split()
            if len(nums) == 16 and all(n.isdigit() for n in nums) and iface.strip() != "lo":
                out["rx_bytes"] += int(nums[0])
                out["tx_bytes"] += int(nums[8])
        elif len(parts) == 1 and parts[0].isdigit() and len(parts[0]) > 15:
            out["t_s"] = int(parts[0]) / 1e9
    missing = [k for k in ("cpu", "ctxt", "t_s") if k not in out]
    if missing:
        raise ValueError(f"client host load: {', '.join(missing)} missing from its /proc")
    return out


def delta(host: str, before: dict, after: dict, clk_tck: int) -> dict:
    """The client_* results columns of one level."""
    b, a = before["cpu"], after["cpu"]
    d = [y - x for x, y in zip(b, a, strict=False)]
    # /proc/stat cpu: user nice system idle iowait irq softirq steal guest guest_nice
    user = d[0] + d[1]
    system = d[2] + (d[5] if len(d) > 5 else 0) + (d[6] if len(d) > 6 else 0)
    total = sum(d[:8])
    idle = d[3] + (d[4] if len(d) > 4 else 0)
    return {
        "client_host": host,
        "client_wall_s": round(after["t_s"] - before["t_s"], 3),
        "client_cpu_user_s": round(user / clk_tck, 3),
        "client_cpu_sys_s": round(system / clk_tck, 3),
        "client_cpu_busy_pct": round(100.0 * (total - idle) / total, 1) if total > 0 else None,
        "client_ctxsw": after["ctxt"] - before["ctxt"],
        "client_net_rx_kb": round((after["rx_bytes"] - before["rx_bytes"]) / 1024, 1),
        "client_net_tx_kb": round((after["tx_bytes"] - before["tx_bytes"]) / 1024, 1),
    }


_TIMES = re.compile(r"(\d+)m([\d.]+)s")


def sysbench_cpu(times_output: str) -> dict:
    """sysbench's own CPU seconds on the client host, from the remote shell's `times` after it
    waited for the level (second line: its children's user and system time, e.g.
    "0m1.250s 0m0.420s"). Empty figures when the level's shell did not get that far."""
    lines = [ln for ln in times_output.splitlines() if ln.strip()]
    found = _TIMES.findall(lines[1]) if len(lines) >= 2 else []
    if len(found) != 2:
        return {"client_sysbench_user_s": None, "client_sysbench_sys_s": None}
    user, system = (int(m) * 60 + float(s) for m, s in found)
    return {"client_sysbench_user_s": round(user, 3), "client_sysbench_sys_s": round(system, 3)}
