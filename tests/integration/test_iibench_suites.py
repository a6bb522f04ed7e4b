"""The iibench suites end to end through `mallocsweep run` (the real runner, collectors, results
and report): the MongoDB path on the wire-protocol stand-in, and the MySQL side on MariaDB under
two allocators. What a user of the results relies on: one row per cell with workload=iibench and
threads = the suite's clients, positive rates and per-row costs, and the stand-in named as such
wherever its figures appear.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from servers.errors import ServerError
from suites.cli.main import main
from tests.integration.runs_helpers import manifest, processes_mentioning, results, scratch_dir
from tests.integration.standin import ensure_standin

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STANDIN_SUITE = REPO / "configs" / "suites" / "mongodb-standin-smoke.toml"
MARIADB_SUITE = REPO / "configs" / "suites" / "iibench-smoke.toml"


def _suite(path: Path) -> dict:
    return tomllib.loads(path.read_text())


@contextmanager
def _run(suite: Path) -> Iterator[tuple[int, Path]]:
    """`mallocsweep run SUITE --out <scratch>` from the repository root (where `make run` runs
    it), with the report written, datasets from the session's cache (conftest); yields (exit
    code, run dir), then removes the scratch dir."""
    with scratch_dir("ms-iis-") as out, pytest.MonkeyPatch.context() as mp:
        mp.chdir(REPO)
        code = main(["run", str(suite), "--out", str(out / "runs"), "--quiet"])
        mp.undo()
        yield code, next((out / "runs").iterdir())


@pytest.fixture(scope="module")
def standin_run():
    ensure_standin()
    with _run(STANDIN_SUITE) as got:
        yield got


@pytest.fixture(scope="module")
def mariadb_run():
    from suites.families.mysql.server import find_mysql

    try:
        find_mysql()
    except ServerError as e:
        pytest.skip(f"no MariaDB server installed ({e}); `make setup` installs mariadb-server")
    with _run(MARIADB_SUITE) as got:
        yield got


def _check_rows(run_dir: Path, suite: dict, allocators: list[str]) -> list[dict]:
    ii = suite["iibench"]
    rows = results(run_dir)
    assert sorted(r["allocator"] for r in rows) == sorted(allocators)
    for r in rows:
        where = f"{r['cell']}: {r}"
        assert r["status"] == "ok", where
        assert r["workload"] == "iibench", where
        assert int(r["threads"]) == ii["clients"], where
        # qps = rows inserted per second, tps = insert batches (transactions) per second.
        qps, tps, duration = float(r["qps"]), float(r["tps"]), float(r["duration_s"])
        assert qps > 0 and tps > 0 and 0 < duration <= ii["max_seconds"] + 5, where
        rows_inserted = qps * duration
        assert rows_inserted <= ii["max_rows"] * 1.01, where
        if duration < ii["max_seconds"] * 0.9:  # ended by the row budget: all of it went in
            assert rows_inserted == pytest.approx(ii["max_rows"], rel=0.01), where
        assert qps / tps == pytest.approx(ii["batch_rows"], rel=0.05), where
        # Per-row costs: CPU µs per row (= CPU s per 1M rows), context switches per row.
        for k in ("cpu_us_per_op", "ctxsw_per_op", "vsz_end_kb", "rss_peak_kb", "lat_p99_ms"):
            assert r[k] not in ("", None), f"{k} empty in {where}"
            assert float(r[k]) > 0, f"{k} not positive in {where}"
    return rows


def test_standin_suite_end_to_end(standin_run):
    code, run_dir = standin_run
    assert code == 0
    suite = _suite(STANDIN_SUITE)
    _check_rows(run_dir, suite, ["builtin"])
    m = manifest(run_dir)
    assert m["status"] == "finished"
    [cell] = m["cells"]
    assert cell["status"] == "ok", cell.get("error")
    server = cell["server"]
    assert server["standin"] is True and "no allocator conclusions" in server["note"]
    assert server["flavor"] == "mongodb" and server["version"].startswith("standin-")
    assert cell["verification"]["verdict"] == "standin"
    assert cell["exit"]["returncode"] == 0 and cell["exit"]["rusage"]["ru_utime"] > 0
    assert processes_mentioning(str(run_dir)) == []


def test_standin_is_labelled_in_the_report(standin_run):
    _, run_dir = standin_run
    summary = (run_dir / "summary.md").read_text()
    html = (run_dir / "report.html").read_text()
    for text in (summary, html):
        assert "stand-in" in text and "no allocator conclusions" in text


def test_mariadb_iibench_suite_end_to_end(mariadb_run):
    code, run_dir = mariadb_run
    assert code == 0
    suite = _suite(MARIADB_SUITE)
    allocators = suite["allocators"]["use"]
    _check_rows(run_dir, suite, allocators)
    m = manifest(run_dir)
    assert m["status"] == "finished"
    assert [c["allocator"]["name"] for c in m["cells"]] == allocators
    for c in m["cells"]:
        assert c["status"] == "ok", c.get("error")
        assert c["verification"]["verdict"] == "verified"
        assert not c["server"].get("standin")
    summary = (run_dir / "summary.md").read_text()
    assert "iibench" in summary and "stand-in" not in summary
    assert processes_mentioning(str(run_dir)) == []
