"""Several client hosts for one run: each level's threads split over them, started together.

How a level's threads are split (split_threads): as evenly as possible, the first hosts taking
one more when the count does not divide, every host at least one thread; a level with fewer
threads than hosts is refused when the suite is read (suites.config.sections).

How they start together: a go-barrier. Each host's ssh session logs in, writes a "ready" record
and waits for a line on its stdin; once every host is ready the runner writes "go" to each
session's stdin at once (microseconds apart), so the hosts start within a one-way trip of each
other over their connections, however long each took to come up. A start time set ahead on our
clock and put on each host's clock with its measured offset was tried first and measured: on
this machine under load (load average ~80) ssh sessions took 2-10 s to come up, longer than any
fixed lead, and hosts started up to 10 s apart; a lead long enough for the worst case would add
that wait to every level. Each host's own clock at its start ("start" record), put on ours with
its measured offset, gives the skew each level really had (recorded with the level).

Each host is a suites.remote.clients.RemoteClients over its own SSH connection; preflight runs
per host and a failing host is named in its one-line error.
"""

from __future__ import annotations

from rundir.format import CLIENT_COLUMNS
from suites.remote.clients import RemoteClients


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

    def __init__(self, clients_section, max_threads: int, wrapper, scripts=None):
        self.section = clients_section
        self.address = clients_section.server_address
        # Each host is sized for the largest share it can get (its nofile limit is checked).
        n = len(clients_section.hosts)
        most = split_threads(max(max_threads, n), n)[0]
        self.hosts = [RemoteClients(clients_section, most, wrapper, target=t, scripts=scripts)
                      for t in clients_section.hosts]  # fmt: skip

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
            "started together by a go-barrier (every host ready, then one go to each)",
            "hosts": [h.to_manifest() for h in self.hosts],
        }

    def load(self) -> list[dict]:
        return [h.load() for h in self.hosts]

    def level_load(self, before: list[dict]) -> tuple[dict, list[dict]]:
        """The level's summed client_* columns, and each host's own."""
        each = [h.level_load(b) for h, b in zip(self.hosts, before, strict=True)]
        return combine_loads(each, [h.facts["cpus"] for h in self.hosts]), each

    def close(self) -> None:
        for h in self.hosts:
            h.close()
