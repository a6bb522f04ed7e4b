"""The wrapper's records, parsed into a LevelResult, agree with what sysbench itself printed."""

import re
import shutil
from pathlib import Path

import pytest

from suites.workloads.sysbench.records import interval_figures, level_result, read_records
from suites.workloads.sysbench.runner import failure_reason as _failure_reason

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sysbench"
HEALTHY = ["point_select@8", "oltp_ro@8", "point_select@1536"]


def printed(log: Path) -> dict:
    """sysbench's own final report figures (test-side reading of its human output)."""
    text = log.read_text()

    def grab(pattern):
        return float(re.search(pattern, text, re.M).group(1))

    return {
        "tps": grab(r"^\s*transactions:\s+\d+\s+\(([\d.]+) per sec\.\)"),
        "qps": grab(r"^\s*queries:\s+\d+\s+\(([\d.]+) per sec\.\)"),
        "events": grab(r"total number of events:\s+(\d+)"),
        "p95": grab(r"95th percentile:\s+([\d.]+)"),
        "avg": grab(r"^\s*avg:\s+([\d.]+)"),
        "max": grab(r"^\s*max:\s+([\d.]+)"),
        "time": grab(r"total time:\s+([\d.]+)s"),
        "intervals": [
            (float(m.group(1)), float(m.group(2)))
            for m in re.finditer(r"^\[ \d+s \] thds: \d+ tps: ([\d.]+) qps: ([\d.]+)", text, re.M)
        ],
    }


def result(name):
    recs = read_records(FIX / f"{name}.jsonl")
    wl, threads = name.split("@")
    return level_result(wl, int(threads), recs, FIX / f"{name}.log"), recs


@pytest.mark.parametrize("name", HEALTHY)
def test_qps_equals_what_sysbench_printed(name):
    res, _ = result(name)
    want = printed(FIX / f"{name}.log")
    assert res.status == "ok" and res.error is None
    assert round(res.qps, 2) == pytest.approx(want["qps"], abs=0.011)
    assert round(res.tps, 2) == pytest.approx(want["tps"], abs=0.011)
    assert res.events == want["events"]
    assert round(res.duration_s, 4) == pytest.approx(want["time"], abs=1e-4)
    assert round(res.lat_avg_ms, 2) == pytest.approx(want["avg"], abs=0.011)
    assert round(res.lat_max_ms, 2) == pytest.approx(want["max"], abs=0.011)


@pytest.mark.parametrize("name", HEALTHY)
def test_our_p95_is_sysbench_p95(name):
    res, _ = result(name)
    assert round(res.lat_p95_ms, 2) == pytest.approx(printed(FIX / f"{name}.log")["p95"], abs=0.011)


@pytest.mark.parametrize("name", HEALTHY)
def test_latencies_are_ordered(name):
    res, _ = result(name)
    assert (
        0 < res.lat_p50_ms <= res.lat_p95_ms <= res.lat_p99_ms <= res.lat_p999_ms <= res.lat_max_ms
    )


@pytest.mark.parametrize("name", HEALTHY)
def test_histogram_holds_every_event(name):
    res, recs = result(name)
    assert recs.histogram.total == res.events
    assert res.sysbench.problems == []


@pytest.mark.parametrize("name", HEALTHY)
def test_intervals_match_printed_lines(name):
    res, recs = result(name)
    want = printed(FIX / f"{name}.log")["intervals"]
    assert len(res.intervals) == len(want) >= 2
    for got, (tps, qps) in zip(res.intervals, want, strict=True):
        assert round(got["tps"], 2) == pytest.approx(tps, abs=0.011)
        assert round(got["qps"], 2) == pytest.approx(qps, abs=0.011)
        assert set(got) >= {"t_s", "tps", "qps", "lat_p95_ms", "errors", "reconnects"}
    assert [i["t_s"] for i in res.intervals] == sorted(i["t_s"] for i in res.intervals)


def test_stalled_level_reports_zero_events_without_cumulative():
    recs = read_records(FIX / "stalled_zero_events.jsonl")
    res = level_result("point_select", 4, recs, None)
    assert res.status == "failed" and "no cumulative report" in res.error
    assert res.events == 0 and res.intervals and all(i["tps"] == 0 for i in res.intervals)


def test_zero_event_cumulative_is_a_failed_level():
    rec = {
        "type": "cumulative",
        "percentile": 95,
        "time_interval": 2.0,
        "time_total": 2.0,
        "events": 0,
        "reads": 0,
        "writes": 0,
        "other": 0,
        "errors": 0,
        "reconnects": 0,
        "latency_pct": 0.0,
    }
    from suites.workloads.sysbench.records import LevelRecords

    res = level_result("oltp_ro", 8, LevelRecords(cumulative=rec), None)
    assert res.status == "failed" and res.error == "the level completed zero events"
    assert res.lat_p95_ms is None


def test_partial_last_line_is_tolerated(tmp_path):
    src = (FIX / "oltp_ro@8.jsonl").read_text().splitlines()
    # killed while writing the histogram: the last record is cut in half
    (tmp_path / "cut.jsonl").write_text("\n".join(src[:3]) + "\n" + src[3][: len(src[3]) // 2])
    recs = read_records(tmp_path / "cut.jsonl")
    assert len(recs.intervals) == 3 and recs.histogram is None and recs.cumulative is None
    assert recs.problems and "not a complete JSON record" in recs.problems[0]


def test_missing_records_file_reads_empty(tmp_path):
    recs = read_records(tmp_path / "none.jsonl")
    assert recs.intervals == [] and recs.cumulative is None


def test_duplicate_histogram_dumps_keep_one(tmp_path):
    lines = (FIX / "oltp_ro@8.jsonl").read_text().splitlines()
    hist = next(ln for ln in lines if '"histogram"' in ln)
    (tmp_path / "dup.jsonl").write_text("\n".join([*lines, hist]) + "\n")
    res, _ = result("oltp_ro@8")
    recs = read_records(tmp_path / "dup.jsonl")
    assert recs.histogram.total == res.events


def test_interval_figures_with_rate_queue():
    rec = {
        "type": "interval",
        "percentile": 95,
        "time_interval": 0.5,
        "time_total": 3.0,
        "events": 100,
        "reads": 1000,
        "writes": 0,
        "other": 200,
        "latency_pct": 0.004,
        "errors": 1,
        "reconnects": 0,
        "queue_length": 7,
        "threads_running": 8,
    }
    got = interval_figures(rec)
    assert got == {
        "t_s": 3.0,
        "tps": 200.0,
        "qps": 2400.0,
        "lat_p95_ms": 4.0,
        "errors": 1,
        "reconnects": 0,
        "threads_running": 8,
        "queue_length": 7,
    }


def test_failure_reason_names_the_cause_and_the_fix(tmp_path):
    log = tmp_path / "l.log"
    shutil.copy(FIX / "oltp_ro@1536_ps_exhausted.log", log)
    reason = _failure_reason(log, "sysbench exited with status 1")
    assert reason.startswith("sysbench exited with status 1: MySQL error: 1461")
    assert "max_prepared_stmt_count" in reason and 'ps_mode = "disable"' in reason
    assert "\n" not in reason


def test_failure_reason_without_fatal_lines(tmp_path):
    (tmp_path / "l.log").write_text("nothing useful\n")
    assert _failure_reason(tmp_path / "l.log", "sysbench killed") == "sysbench killed"
