"""A level split over several client hosts: how threads are shared, and how the hosts' figures
are combined (suites.remote.hosts, suites.workloads.sysbench.split)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.remote.hosts import combine_loads, split_threads
from suites.workloads.sysbench.histogram import LatencyHistogram
from suites.workloads.sysbench.records import LevelRecords, level_result
from suites.workloads.sysbench.split import combine, combined_interval


@pytest.mark.parametrize(
    ("threads", "hosts", "shares"),
    [(7, 2, [4, 3]), (8, 2, [4, 4]), (2, 2, [1, 1]), (1536, 3, [512, 512, 512]), (5, 3, [2, 2, 1])],
)
def test_threads_are_split_as_evenly_as_possible(threads, hosts, shares):
    assert split_threads(threads, hosts) == shares


def test_fewer_threads_than_hosts_cannot_be_split():
    with pytest.raises(ValueError, match="cannot be split"):
        split_threads(1, 2)


def _records(events_per_s: list[int], buckets: dict[int, int], avg: float, lmax: float):
    recs = LevelRecords()
    for k, e in enumerate(events_per_s, 1):
        recs.intervals.append(
            {"type": "interval", "time_total": float(k), "time_interval": 1.0, "events": e,
             "reads": 10 * e, "writes": 0, "other": 0, "errors": 0, "reconnects": 0,
             "threads_running": 2}
        )  # fmt: skip
    total = sum(buckets.values())
    recs.cumulative = {
        "type": "cumulative", "time_total": float(len(events_per_s)) + 0.4,
        "time_interval": float(len(events_per_s)) + 0.4, "events": total, "reads": 10 * total,
        "errors": 1, "reconnects": 0, "latency_avg": avg / 1000, "latency_max": lmax / 1000,
        "latency_min": 0.0001,
    }  # fmt: skip
    recs.histogram = LatencyHistogram(buckets)
    return recs


def test_two_hosts_figures_are_combined_from_their_records():
    h = LatencyHistogram()
    fast, slow = h.bucket_of(0.2), h.bucket_of(5.0)
    # host a: 3 intervals, all fast; host b: 2 intervals, a tenth slow (its p95 is slow)
    a = _records([100, 100, 100], {fast: 310}, avg=0.2, lmax=0.3)
    b = _records([50, 50], {fast: 90, slow: 10}, avg=0.68, lmax=6.0)
    parts = [level_result("point_select", n, r, None) for n, r in ((3, a), (2, b))]
    assert parts[1].lat_p95_ms == pytest.approx(h.value(slow))
    res = combine("point_select", 5, ["a", "b"], [a, b], parts, Path("x.log"))
    assert res.status == "ok"
    # each host's rate over the two intervals both wrote, summed (not over a's third)
    assert res.tps == pytest.approx(100 + 50) and res.qps == pytest.approx(1500)
    assert res.events == 410 and res.errors == 2
    # merged histogram: 20 slow of 410 events is below 5 %: p95 is fast, p99 slow; an average
    # of the two hosts' p95 would be neither
    assert res.lat_p95_ms == pytest.approx(h.value(fast))
    assert res.lat_p99_ms == pytest.approx(h.value(slow))
    assert res.lat_max_ms == pytest.approx(6.0)
    assert res.lat_avg_ms == pytest.approx((0.2 * 310 + 0.68 * 100) / 410)
    assert [iv["tps"] for iv in res.intervals] == [150, 150]
    assert res.sysbench.common_window == {"common_intervals": 2, "seconds": 2.0}


def test_a_failing_host_fails_the_level_and_is_named():
    a = _records([100, 100], {1: 200}, avg=0.2, lmax=0.3)
    b = LevelRecords()
    parts = [level_result("oltp_ro", 1, a, None), level_result("oltp_ro", 1, b, None)]
    res = combine("oltp_ro", 2, ["a", "b"], [a, b], parts, Path("x.log"))
    assert res.status == "failed" and res.error.startswith("client host b: ")


def test_combined_interval_sums_counts():
    iv = combined_interval(
        [{"time_total": 1.0, "time_interval": 1.0, "events": 3, "reads": 30},
         {"time_total": 1.002, "time_interval": 1.001, "events": 2, "reads": 20}]
    )  # fmt: skip
    assert iv["events"] == 5 and iv["reads"] == 50 and iv["time_total"] == 1.002


def test_client_columns_are_summed_over_hosts():
    one = {"client_host": "a", "client_wall_s": 4.0, "client_cpu_user_s": 1.0,
           "client_cpu_sys_s": 0.5, "client_cpu_busy_pct": 50.0, "client_ctxsw": 100,
           "client_net_rx_kb": 10.0, "client_net_tx_kb": 1.0, "client_sysbench_user_s": 0.8,
           "client_sysbench_sys_s": 0.2}  # fmt: skip
    two = one | {"client_host": "b", "client_wall_s": 4.1, "client_cpu_busy_pct": 20.0}
    out = combine_loads([one, two], cpus=[2, 6])
    assert out["client_host"] == "a,b" and out["client_wall_s"] == 4.1
    assert out["client_cpu_user_s"] == 2.0 and out["client_ctxsw"] == 200
    assert out["client_cpu_busy_pct"] == pytest.approx((50 * 2 + 20 * 6) / 8, abs=0.05)
    assert (
        combine_loads([one, two | {"client_sysbench_user_s": None}], [2, 2])[
            "client_sysbench_user_s"
        ]
        is None
    )


class _Host:
    """A client host's connection answering `--version` with `answer` (stdout)."""

    def __init__(self, answer: str, rc: int = 0):
        self.answer, self.rc = answer, rc

    def run(self, command, input=None, timeout_s=30):
        import subprocess

        return subprocess.CompletedProcess(command, self.rc, self.answer.encode(), b"no module")


def _clients(answer: str, rc: int = 0):
    from types import SimpleNamespace

    from suites.remote.clients import RemoteClients

    section = SimpleNamespace(
        hosts=["bench@c1"], server_address="10.0.0.5", ssh_config="", connect_timeout_s=5,
        python="/opt/ms/bin/python",
    )  # fmt: skip
    clients = RemoteClients(section, 4, Path("x.lua"), program="python")
    clients.host.close()  # its temp directory: the stub below answers instead
    clients.host = _Host(answer, rc)
    return clients


def test_a_client_host_running_other_code_is_refused_in_one_line():
    import json

    from suites.errors import SuiteError
    from suites.remote.identity import identity

    ours = identity()
    assert _clients(json.dumps(ours))._check_python() == ours
    for changed in ({"digest": "0" * 16}, {"version": "0.0.1"}):
        with pytest.raises(SuiteError) as e:
            _clients(json.dumps(ours | changed))._check_python()
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith("client host bench@c1: its mallocsweep")
        assert f"ours is {ours[next(iter(changed))]}" in msg
    with pytest.raises(SuiteError, match="mallocsweep is not installed for /opt/ms/bin/python"):
        _clients("", rc=1)._check_python()
