"""Several client hosts for one run: each level's threads split over them, started together.

How a level's threads are split (split_threads): as evenly as possible, the first hosts taking
one more when the count does not divide, every host at least one thread; a level with fewer
threads than hosts is refused when the suite is read (suites.config_sections).

How they start together: every host's shell waits until one moment, set a little ahead on our
clock and put on each host's clock with the offset measured when the host was opened
(suites.remote.clock), then starts sysbench and reports its clock. A go-signal sent to all the
hosts at once would need each ssh session's stdin kept open through our launcher (it is the
launcher's own gate); a start time needs nothing but the offsets we measure anyway, does not
depend on how long each ssh session takes to come up (a command through the shared connection
costs a round trip plus a shell start, more on a loaded host), and its error is bounded by the
offset's uncertainty (half the smallest round trip). Each host's reported start, put back on our
clock, gives the skew the level really had (recorded with the level).

Each host is a suites.remote.clients.RemoteClients over its own SSH connection; preflight runs
per host and a failing host is named in its one-line error.
"""

from __future__ import annotations

import time

from rundir.format import CLIENT_COLUMNS
from suites.remote.clients import RemoteClients

# How far ahead of "now" a split level's start is set: every host's ssh session must be up and
# waiting by then (a command through a shared connection takes tens of ms; a loaded host more).
START_LEAD_S = 1.5


def split_threads(threads: int, hosts: int) -> list[int]:
    """`threads` over `hosts` as evenly as possible (the first hosts take the remainder)."""
    if hosts < 1 or threads < hosts:
        raise ValueError(f"{threads} threads cannot be split over {hosts} client hosts")
    base, extra = divmod(threads, hosts)
    return [base + (1 if i < extra else 0) for i in range(hosts)]


def combine_loads(per_host: list[dict], cpus: list[int]) -> dict:
    """The client_* columns of a level from each host's own (hostload.delta + sysbench_cpu):
    CPU seconds, context switches and traffic summed; the wall span the longest host's; the busy
    share over all their CPUs (each host's share weighted by its CPU count)."""
    out: dict = {"client_host": ",".join(h["client_host"] for h in per_host)}
    summed = (
        "client_cpu_user_s",
        "client_cpu_sys_s",
        "client_ctxsw",
        "client_net_rx_kb",
        "client_net_tx_kb",
        "client_sysbench_user_s",
        "client_sysbench_sys_s",
    )
    for k in summed:
        vals = [h.get(k) for h in per_host]
        out[k] = None if any(v is None for v in vals) else round(sum(vals), 3)
    walls = [h.get("client_wall_s") for h in per_host]
    out["client_wall_s"] = None if None in walls else max(walls)
    busy = [h.get("client_cpu_busy_pct") for h in per_host]
    out["client_cpu_busy_pct"] = (
        None
        if None in busy or not sum(cpus)
        else round(sum(b * c for b, c in zip(busy, cpus, strict=True)) / sum(cpus), 1)
    )
    assert set(out) == set(CLIENT_COLUMNS)
    return out


class ClientHosts:
    """The run's client hosts: open() checks and prepares every one, close() leaves nothing."""

    def __init__(self, clients_section, max_threads: int, wrapper):
        self.section = clients_section
        self.address = clients_section.server_address
        # Each host is sized for the largest share it can get (its nofile limit is checked).
        n = len(clients_section.hosts)
        most = split_threads(max(max_threads, n), n)[0]
        self.hosts = [RemoteClients(clients_section, most, wrapper, target=t) for t in
                      clients_section.hosts]  # fmt: skip

    @property
    def target(self) -> str:
        return ",".join(h.target for h in self.hosts)

    def open(self) -> dict:
        try:
            for h in self.hosts:
                h.open()
        except BaseException:
            self.close()
            raise
        return self.to_manifest()

    def to_manifest(self) -> dict:
        return {
            "host": self.target,
            "server_address": self.address,
            "split": "threads as evenly as possible, the first hosts taking the remainder; "
            "started together at one moment set on each host's clock from its measured offset",
            "hosts": [h.to_manifest() for h in self.hosts],
        }

    def start_time(self) -> float:
        """The moment (our clock, seconds) a split level's hosts start at."""
        return time.time() + START_LEAD_S

    def load(self) -> list[dict]:
        return [h.load() for h in self.hosts]

    def level_load(self, before: list[dict]) -> tuple[dict, list[dict]]:
        """The level's summed client_* columns, and each host's own."""
        each = [h.level_load(b) for h, b in zip(self.hosts, before, strict=True)]
        return combine_loads(each, [h.facts["cpus"] for h in self.hosts]), each

    def close(self) -> None:
        for h in self.hosts:
            h.close()
