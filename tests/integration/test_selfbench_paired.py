"""make bench's sweep-vs-raw arm on a real MariaDB: paired blocks within one server life, the raw
blocks with nothing of ours reading the server, both arms doing the same work."""

from __future__ import annotations

import pytest

from bench import paired
from collectors.collector_session import CollectorSession
from rundir.format import SAMPLE_COLUMNS
from suites.families.mysql.server import MySQLSettings
from suites.workloads.sysbench import SysbenchOptions
from tests.integration.mariadb import start_prepared
from tests.integration.runs_helpers import scratch_dir

pytestmark = pytest.mark.integration
OPTS = SysbenchOptions(tables=1, table_size=2000)


def test_paired_blocks_share_one_life_and_raw_blocks_run_alone(
    tmp_path, mariadb_binary, copy_pristine
):
    with scratch_dir("ms-pb-") as work:
        copy_pristine(mariadb_binary, work)
        settings = MySQLSettings(buffer_pool_mb=64, max_threads=32, innodb_log_file_mb=48)
        srv = coll = None
        sweep = paired.PairedPoint("point_select", 4, 2)
        sources = paired.PairedPoint("point_select", 4, 1, paired.SOURCE_ARMS)
        try:
            srv, _, _ = start_prepared(work, OPTS, settings, tmp_path / "prepare.log")
            pid = srv.pid
            coll = CollectorSession(tmp_path / "samples.csv", list(SAMPLE_COLUMNS))
            coll.start(pid, "warmup")
            coll.set_status_source(srv.global_status, srv.connection_status)
            paired.one_life(srv, coll, OPTS, [sweep, sources], 2, tmp_path)
            coll.check_sampling()
            assert srv.pid == pid  # one server life for every block
        finally:
            if coll is not None:
                coll.stop(None)
            if srv is not None:
                srv.stop()

    assert [b.arm for b in sweep.blocks] == ["ours", "raw", "raw", "ours"]
    assert [b.arm for b in sources.blocks] == list(paired.SOURCE_ARMS)
    for b in sweep.blocks + sources.blocks:
        assert b.qps > 0 and b.sysbench_queries > 0 and b.server_cpu_s > 0
        assert b.others_cpu_s is not None
        # The server executed what sysbench counted, in every arm (ours adds its 2 status reads).
        assert 1.0 <= b.server_questions / b.sysbench_queries < 1.01, b
        if b.arm == "ours":
            assert b.sampler_reads >= 1 and b.runner_cpu_s is not None
        else:
            assert b.sampler_reads == 0, f"the sampler read the server during a {b.arm} block"
    # Raw blocks ran the stock script alone: no wrapper records, no report interval.
    logs = sorted(tmp_path.glob("0*-raw-*.log"))
    assert logs and not list(tmp_path.glob("0*-raw-*.jsonl"))
    assert all("mallocsweep" not in p.read_text() for p in logs)
    assert list(tmp_path.glob("0*-ours-*.jsonl")) and list(tmp_path.glob("0*-wrapper-*.jsonl"))
    s = sweep.summary()
    assert s["pairs"] == 2 and s["verdict"] in ("met", "not met", "not resolvable")
    assert s["sampler_reads_in_other_arms"] == 0
    assert s["server_cpu_per_query_ratio"]["ratio"] > 0 and s["server_us_per_query"]["raw"] > 0
    assert [st["arm"] for st in sources.summary()["steps"]] == ["raw_interval", "wrapper", "ours"]
