"""Read-while-writing and the storage-engine dimension end to end through `mallocsweep run`:
InnoDB and MyRocks under glibc and jemalloc (one run, four server lives), then iibench's table and
sysbench's OLTP_RO and POINT_SELECT on MyRocks, and the engines a server does not have refused
before anything starts.

What a user of the results relies on: per cell a load row and a run row, both rates above zero,
the stop rule met (every reader read at least as many rows as the table holds), the phase costs
filled; the engine in results.csv, in the server label (so points never mix engines), in the
report's Symas tables and in compare; the table really on the engine asked for.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from servers.acquire import fetch
from servers.errors import ServerError
from suites.cli.main import main
from tests.integration import roots
from tests.integration.roots import CACHE
from tests.integration.runs_helpers import manifest, processes_mentioning, results

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SUITE = """
[suite]
name = "rww-test"
kind = "rww"
[server]
buffer_pool_mb = 64
engines = ["innodb", "rocksdb"]
rocksdb_block_cache_mb = 48
rocksdb_write_buffer_mb = 8
[allocators]
use = ["glibc", "jemalloc"]
[rww]
records = 1200
value_bytes = 4000
batch_rows = 100
readers = 2
max_seconds = 60
load_max_seconds = 60
"""
IIBENCH_ROCKSDB = """
[suite]
name = "iibench-rocksdb"
kind = "iibench"
[server]
buffer_pool_mb = 64
engines = ["rocksdb"]
rocksdb_block_cache_mb = 48
rocksdb_write_buffer_mb = 8
[allocators]
use = ["glibc"]
[iibench]
clients = 2
max_rows = 4000
max_seconds = 30
batch_rows = 200
secondary_indexes = 1
"""
SYSBENCH_ROCKSDB = """
[suite]
name = "sysbench-rocksdb"
[server]
buffer_pool_mb = 64
engines = ["rocksdb"]
rocksdb_block_cache_mb = 48
rocksdb_write_buffer_mb = 8
[allocators]
use = ["glibc"]
[dataset]
tables = 1
table_size = 2000
[warmup]
min_s = 1
cap_s = 4
threads = 2
[sysbench]
workloads = ["oltp_ro", "point_select"]
threads = [2]
duration_s = 3
report_interval_s = 1
"""


def _run(root: Path, text: str, *extra: str) -> tuple[int, Path | None]:
    path = root / f"suite-{len(list(root.glob('suite-*')))}.toml"
    path.write_text(text)
    out = root / "runs"
    before = set(out.iterdir()) if out.is_dir() else set()
    mp = pytest.MonkeyPatch()
    mp.setenv("MALLOCSWEEP_CACHE", str(root / "cache"))  # shared: one empty datadir per engine
    mp.chdir(REPO)
    try:
        code = main(["run", str(path), "--out", str(out), "--quiet", *extra])
    finally:
        mp.undo()
    new = set(out.iterdir()) - before if out.is_dir() else set()
    return code, (next(iter(new)) if new else None)


@pytest.fixture(scope="module")
def root():
    from suites.families.mysql.engines import check_engine
    from suites.families.mysql.server import find_mysql

    try:
        binary = find_mysql()
        check_engine(binary, "rocksdb")
    except ServerError as e:
        pytest.skip(f"no MariaDB with MyRocks here ({e}); `make setup` installs both")
    d = Path(tempfile.mkdtemp(prefix="ms-rww-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def rww_run(root):
    code, run_dir = _run(root, SUITE)
    return code, run_dir


def test_read_while_writing_on_both_engines_under_two_allocators(rww_run):
    code, run_dir = rww_run
    assert code == 0, manifest(run_dir).get("error")
    rows = results(run_dir)
    got = sorted((r["engine"], r["allocator"], r["workload"]) for r in rows)
    assert got == sorted(
        (e, a, w)
        for e in ("innodb", "rocksdb")
        for a in ("glibc", "jemalloc")
        for w in ("rww_load", "rww_run")
    )
    for r in rows:
        where = f"{r['cell']} {r['workload']}: {r}"
        assert r["status"] == "ok", where
        assert r["server"].endswith("+rocksdb") == (r["engine"] == "rocksdb"), where
        assert float(r["write_ops_s"]) > 0, where
        assert int(r["table_rows"]) == 1200, where
        # the phase costs: server CPU, CPU% = (usr+sys)/wall, wall, RSS at end and peak, ctxsw/op
        for k in ("cpu_user_s", "cpu_sys_s", "window_s", "cpu_overhead", "ctxsw_per_op"):
            assert r[k] not in ("", None), (k, where)
        assert int(r["rss_peak_kb"]) >= int(r["rss_end_kb"]) > 0, where
        overhead = (float(r["cpu_user_s"]) + float(r["cpu_sys_s"])) / float(r["window_s"])
        # the columns are rounded (CPU to 0.01 s, the window to 0.01 s): on a level of 0.05 s
        # that rounding alone moves the quotient by tenths (0.06 / 0.05 = 1.2 against 1.2121)
        window = float(r["window_s"])
        rounding = 0.01 / window + overhead * 0.005 / window
        assert abs(overhead - float(r["cpu_overhead"])) < 0.01 + rounding, where
        if r["workload"] == "rww_load":
            assert int(r["events"]) == 1200 and r["threads"] == "1", where
            assert r["read_ops_s"] == "", where
        else:
            assert r["threads"] == "3", where  # 1 writer + 2 readers
            assert float(r["read_ops_s"]) > 0, where
            assert int(r["reads_min"]) >= int(r["table_rows"]), where  # the stop rule
            for side in ("write", "read"):
                p50, p99 = float(r[f"{side}_lat_p50_ms"]), float(r[f"{side}_lat_p99_ms"])
                assert 0 < p50 <= p99, where
            # every operation of the level is a read or a write
            dur = float(r["duration_s"])
            ops = (float(r["write_ops_s"]) + float(r["read_ops_s"])) * dur
            assert abs(ops - int(r["events"])) <= 0.01 * int(r["events"]) + 2, where
    m = manifest(run_dir)
    for c in m["cells"]:
        settings = c["server"]["settings"]
        assert settings["engine"] == c["engine"]
        assert settings["rocksdb_block_cache_mb"] == 48  # MyRocks' memory, as sized
    assert set(m["datasets"]) == {"innodb", "rocksdb"}
    assert m["datasets"]["rocksdb"]["key"] != m["datasets"]["innodb"]["key"]
    assert processes_mentioning(str(run_dir)) == []


def test_engine_in_report_and_compare(rww_run, root, tmp_path):
    _, run_dir = rww_run
    summary = (run_dir / "summary.md").read_text()
    assert "Read-while-writing on innodb (mariadb-10" in summary
    assert "Read-while-writing on rocksdb (mariadb-10" in summary and "+rocksdb)" in summary
    assert "RSS at the end of the run against glibc" in summary
    html = (run_dir / "report.html").read_text()
    assert "+rocksdb" in html
    # A second run (glibc only, both engines) to compare with: a run compared with itself is
    # refused (issue 27).
    code, base = _run(root, SUITE, "--allocators", "glibc")
    assert code == 0, manifest(base).get("error")
    out = tmp_path / "cmp"
    code = main(["compare", str(base), str(run_dir), "--out", str(out)])
    assert code in (0, 2)  # one round per side: no verdict, but every point listed
    (written,) = out.glob("compare-*-vs-*.md")  # named by both runs
    text = written.read_text()
    rocks = [ln for ln in text.splitlines() if ln.startswith("| mariadb-") and "+rocksdb" in ln]
    inno = [ln for ln in text.splitlines() if ln.startswith("| mariadb-") and "+rocksdb" not in ln]
    assert any("rww_run" in ln for ln in rocks) and any("rww_run" in ln for ln in inno)


def test_iibench_table_on_myrocks(root):
    code, run_dir = _run(root, IIBENCH_ROCKSDB)
    assert code == 0, manifest(run_dir).get("error")
    (row,) = results(run_dir)
    assert row["engine"] == "rocksdb" and row["server"].endswith("+rocksdb")
    assert row["status"] == "ok" and int(row["events"]) == 4000
    # The table is on MyRocks: iibench's prepare reads information_schema after CREATE TABLE and
    # fails the cell otherwise (suites.families.mysql.engines.check_tables), so an ok cell proves it.
    assert manifest(run_dir)["cells"][0]["server"]["settings"]["engine"] == "rocksdb"


def test_sysbench_on_myrocks(root):
    code, run_dir = _run(root, SYSBENCH_ROCKSDB)
    assert code == 0 and run_dir is not None, run_dir and manifest(run_dir).get("error")
    rows = results(run_dir)
    assert sorted(r["workload"] for r in rows) == ["oltp_ro", "point_select"]
    for r in rows:
        assert r["engine"] == "rocksdb" and r["server"].endswith("+rocksdb"), r
        assert r["status"] == "ok" and float(r["qps"]) > 0, r
    # The sbtest tables are on MyRocks: the prepare reads information_schema after sysbench's
    # CREATE TABLE (suites.families.mysql.engines.check_tables) and fails the cell otherwise.
    assert manifest(run_dir)["cells"][0]["server"]["settings"]["engine"] == "rocksdb"


def _older_patch() -> str:
    return roots.older_mariadb_patch()


def _newest_mysql() -> str:
    root = roots.rooted_server("mysql")  # the newest MySQL of Debian unstable, fetched once
    return next(s.spec for s in fetch.list_fetched() if Path(s.path) == root)


@pytest.mark.parametrize(
    "which, words",
    [(_older_patch, "has no"), (_newest_mysql, "has no MyRocks engine")],
    ids=["older-mariadb-basedir", "mysql-root"],
)
def test_rocksdb_on_a_server_without_it_is_one_line_before_any_server(root, which, words, capsys):
    # Fetched here when no earlier test did (the fetch tests' cache, so once per machine): an
    # older MariaDB patch of the host's release as a basedir, and the newest MySQL as a root.
    os.environ.setdefault("MALLOCSWEEP_SERVERS", str(CACHE))
    spec = which()
    fetch.fetch(spec)
    out_before = set((root / "runs").iterdir()) if (root / "runs").is_dir() else set()
    # MySQL 9.7 links tcmalloc itself: its arm is `builtin` (glibc is refused, for another reason)
    alloc = "builtin" if spec.startswith("mysql") else "glibc"
    code, run_dir = _run(
        root, SUITE, "--server", f"fetched:{spec}", "--engines", "rocksdb", "--allocators", alloc
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and run_dir is None
    assert len(err) == 1 and "server.engines: rocksdb" in err[0] and words in err[0], err
    assert set((root / "runs").iterdir()) == out_before if (root / "runs").is_dir() else True
