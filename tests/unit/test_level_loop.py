"""The one level loop (suites.workloads.level_loop) on stand-in clients: shell processes that write JSON
records, alone or several behind a go-barrier, stopped on purpose, at a deadline, or failing to
start. Real sysbench levels, client hosts and the Python agent run through it in the
integration tests."""

from __future__ import annotations

from pathlib import Path

from servers.launch import spawn
from suites.workloads.level_loop import Stream, run_streams

ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


class Rates:
    """Records {"type": "interval", "t": .., "n": ..}: n operations in a 1 s interval."""

    def rates(self, rec: dict) -> tuple[float, float, float]:
        return float(rec["t"]), float(rec["n"]), float(rec["n"])

    def combine(self, recs: list[dict]) -> dict:
        return {"type": "interval", "t": max(r["t"] for r in recs), "n": sum(r["n"] for r in recs)}


def _interval(t: int, n: int) -> str:
    return f"""echo '{{"type":"interval","t":{t},"n":{n}}}'"""


def _stream(tmp: Path, name: str, body: str, gated: bool = False, aborted=None) -> Stream:
    records = tmp / f"{name}.jsonl"

    def start(scratch: Path, go):
        script = body
        if go is not None:  # the barrier: say ready, wait for the go line on the pipe
            script = f"""echo '{{"type":"ready"}}'; read -r _ <&{go}; {body}"""
        return spawn(
            ["/bin/bash", "-c", script],  # bash: the go fd may have two digits
            env=ENV,
            cwd=scratch,
            stdout=records,
            stderr=tmp / f"{name}.log",
            pass_fds=(go,) if go is not None else (),
        )

    abort = (lambda: aborted.append(name)) if aborted is not None else None
    return Stream(name, start, records, abort=abort, gated=gated)


def test_one_stream_hands_each_interval_on_as_it_comes(tmp_path):
    body = "; ".join(f"{_interval(t, 10 * t)}; sleep 0.1" for t in (1, 2, 3))
    seen, other = [], []
    s = _stream(tmp_path, "local", body + """; echo '{"type":"done"}'""")
    run = run_streams(
        [s], Rates(), limit_s=30, on_interval=lambda *a: seen.append(a),
        on_record=lambda st, rec: other.append(rec["type"]),
    )  # fmt: skip
    assert seen == [(1.0, 10.0, 10.0), (2.0, 20.0, 20.0), (3.0, 30.0, 30.0)]
    assert other == ["interval"] * 3 + ["done"]  # every record, in order
    assert not run.timed_out and not run.stopped and run.started_all
    assert s.child.exit.returncode == 0 and run.follow in ("inotify+pidfd", "polling")


def test_gated_streams_start_together_and_their_intervals_are_combined(tmp_path):
    short = _interval(1, 1)  # ends after its first interval
    # the slow one lives on after its last interval: each is read while it still runs
    slow = "; ".join(["sleep 0.3", *(_interval(t, 5) for t in (1, 2, 3)), "sleep 2"])
    streams = [_stream(tmp_path, "a", short, True), _stream(tmp_path, "b", slow, True)]
    seen = []
    run = run_streams(
        streams, Rates(), limit_s=30, on_interval=lambda *a: seen.append(a), ready_timeout_s=10
    )
    assert run.go_at is not None and all(s.ready_at is not None for s in streams)
    # interval k goes on once every stream still running wrote it, summed over those that did
    assert seen == [(1.0, 6.0, 6.0), (2.0, 5.0, 5.0), (3.0, 5.0, 5.0)]


def test_intervals_only_some_streams_wrote_are_left_when_all_have_ended(tmp_path):
    streams = [
        _stream(tmp_path, "a", "; ".join(_interval(t, 1) for t in (1, 2, 3)), True),
        _stream(tmp_path, "b", f"sleep 0.3; {_interval(1, 5)}; {_interval(2, 5)}", True),
    ]
    seen = []
    run_streams(streams, Rates(), limit_s=30, on_interval=lambda *a: seen.append(a))
    # the timeline's intervals are the ones every host wrote (one clock for the window marks)
    assert seen == [(1.0, 6.0, 6.0), (2.0, 6.0, 6.0)]


def test_stop_when_ends_the_clients_on_purpose(tmp_path):
    body = """i=0; while true; do i=$((i+1)); echo "{\\"type\\":\\"interval\\",\\"t\\":$i,\\"n\\":1}"; sleep 0.1; done"""
    s = _stream(tmp_path, "local", body)
    seen = []
    run = run_streams(
        [s], Rates(), limit_s=30, on_interval=lambda *a: seen.append(a),
        stop_when=lambda: len(seen) >= 3,
    )  # fmt: skip
    assert run.stopped and not run.timed_out and len(seen) >= 3
    assert s.child.exit.signal == 15  # SIGTERM: a client that reports and exits


def test_a_client_that_outlives_its_deadline_is_killed_and_aborted_there(tmp_path):
    aborted = []
    s = _stream(tmp_path, "host", "sleep 30", aborted=aborted)
    run = run_streams([s], Rates(), limit_s=0.5)
    # killed (SIGKILL: it was not left to sleep its 30 s) and only past its deadline
    assert run.timed_out and s.child.exit.signal == 9 and aborted == ["host"]
    assert run.wall_s >= 0.5


def test_a_stream_that_cannot_start_ends_the_level_and_the_others(tmp_path):
    started = _stream(tmp_path, "a", "sleep 30", gated=True)

    def fails(scratch, go):
        raise OSError(2, "No such file or directory")

    broken = Stream("b", fails, tmp_path / "b.jsonl", gated=True)
    run = run_streams([started, broken], Rates(), limit_s=30)
    assert broken.start_error is not None and broken.child is None
    assert not run.started_all and started.child.exit is not None  # killed, reaped
