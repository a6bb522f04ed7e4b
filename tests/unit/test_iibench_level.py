"""run_level's failure path without a server: clients that cannot connect fail the level with
the reason, in one line, and no client process is left behind."""

import json

import pytest

from suites.families.driver import Driver
from suites.workloads.iibench.run_level import PROCESSES, THREADS, run_level
from suites.workloads.iibench.spec import IIBenchSpec
from suites.workloads.level_result import ClientTarget


@pytest.mark.parametrize("mode", [THREADS, PROCESSES])
def test_unreachable_server_fails_the_level_with_the_reason(mode, short_tmp):
    target = ClientTarget(kind="mysql", socket=str(short_tmp / "no.sock"), database="iibench")
    spec = IIBenchSpec(clients=2, max_rows=100, batch_rows=10, startup_timeout_s=60)
    log = short_tmp / "level.log"
    res = run_level(target, spec, log, mode=mode)
    assert res.status == "failed"
    assert "insert client" in res.error and "cannot connect to MySQL at socket" in res.error
    assert "\n" not in res.error
    assert res.events == 0 and res.workload == "iibench" and res.threads == 2
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert events[0] == "start" and events[-1] == "summary"


class _NoIIBench(Driver):
    """A family's driver that has no iibench backend (a PostgreSQL one, before it had one)."""

    name = "pgsql"
    ref = f"{__name__}:NO_IIBENCH"


NO_IIBENCH = _NoIIBench()


def test_a_driver_without_an_iibench_backend_fails_each_client(short_tmp):
    target = ClientTarget(driver_ref=NO_IIBENCH.ref)
    res = run_level(target, IIBenchSpec(clients=1, max_rows=10), short_tmp / "l.log", mode=THREADS)
    assert res.status == "failed"
    assert "no iibench backend speaks pgsql" in res.error


def test_bad_mode_is_refused(short_tmp):
    with pytest.raises(ValueError, match="mode must be"):
        run_level(ClientTarget(kind="mysql"), IIBenchSpec(), short_tmp / "l.log", mode="fibers")


class _FakeBackend:
    """A server stand-in inside the test process: inserts and queries take a little time."""

    inserted = 0  # rows inserted so far, by every client (THREADS mode: one process)
    queries_at: list[int] = []  # the rows inserted when each query began

    def __init__(self, target, **_):
        pass

    def insert(self, rows):
        import time

        time.sleep(0.002)
        _FakeBackend.inserted += len(rows)

    def query(self, price_from):
        import time

        _FakeBackend.queries_at.append(_FakeBackend.inserted)
        time.sleep(0.05)
        return 10

    def close(self):
        pass


def test_query_clients_stop_with_the_inserts_and_rate_over_their_own_time(monkeypatch, short_tmp):
    import suites.workloads.iibench.client as client

    monkeypatch.setattr(client, "open_backend", _FakeBackend)
    monkeypatch.setattr(_FakeBackend, "inserted", 0)
    monkeypatch.setattr(_FakeBackend, "queries_at", [])
    spec = IIBenchSpec(
        clients=2, max_rows=4000, batch_rows=100, query_clients=2, report_interval_s=0.2
    )
    res = run_level(ClientTarget(kind="mysql"), spec, short_tmp / "l.log", mode=THREADS)
    assert res.status == "ok", res.error
    # 40 batches over the level's duration: both figures are rounded (duration to 1 ms, tps to
    # 0.01), and the fake backend's level can last a few ms, where 1 ms of rounding is a wide share
    assert res.events == 4000 and _rounded_rate(res.tps, 40, res.duration_s, 0.01)
    q = res.iibench.query
    assert q.queries > 0 and q.queries == len(_FakeBackend.queries_at)
    # Stopped when the inserts ended: a query client starts no query once every row is in,
    # beyond the one each may have been starting as the last insert landed (whatever the time
    # it took: the logic, not the machine's speed).
    assert sum(n >= 4000 for n in _FakeBackend.queries_at) <= spec.query_clients
    assert q.duration_s >= res.duration_s - 0.01  # rated over their own time, which spans it
    assert _rounded_rate(q.queries_per_s, q.queries, q.duration_s, 0.1)


def _rounded_rate(rate: float, count: float, seconds: float, step: float) -> bool:
    """`rate` is count / s rounded to `step`, for some s that rounds to `seconds` (1 ms)."""
    lo, hi = count / (seconds + 0.0005), count / max(seconds - 0.0005, 1e-9)
    return lo - step / 2 - 1e-9 <= rate <= hi + step / 2 + 1e-9


def test_reports_bracket_the_load_and_clients_disconnect_after_the_last(monkeypatch, short_tmp):
    """t=0 report at the clock start; the final report before any client has disconnected."""
    import suites.workloads.iibench.client as client

    closed: list[float] = []
    reports: list[tuple] = []

    class Backend(_FakeBackend):
        def close(self):
            import time

            closed.append(time.monotonic())

    def on_interval(*a):
        import time

        reports.append((time.monotonic(), *a))

    monkeypatch.setattr(client, "open_backend", Backend)
    spec = IIBenchSpec(clients=3, max_rows=3000, batch_rows=100, report_interval_s=0.05)
    res = run_level(
        ClientTarget(kind="mysql"), spec, short_tmp / "l.log", on_interval, mode=THREADS
    )
    assert res.status == "ok", res.error
    assert reports[0][1:] == (0.0, 0.0, 0.0)
    assert len(reports) == len(res.intervals) + 1
    assert sum(i["rows"] for i in res.intervals) == 3000
    assert len(closed) == 3 and min(closed) > reports[-1][0]
