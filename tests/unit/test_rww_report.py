"""The read-while-writing report: the RSS comparison (the Symas study's conclusion), each
allocator's run-end RSS over glibc's with the paired interval and a verdict in memory words, from
results rows; and the run's header naming the [rww] load, not the unused [dataset]."""

from __future__ import annotations

import math
from pathlib import Path

from analysis.rww_tables import rss_ratio_table, rss_ratios
from rundir.read import Run

SERVER = "mariadb-10.11.19+rocksdb"


def _row(alloc: str, rnd: int, rss: float, workload: str = "rww_run") -> dict:
    return {
        "server": SERVER,
        "allocator": alloc,
        "thp": "system",
        "workload": workload,
        "repeat": rnd,
        "rss_end_kb": rss,
        "status": "ok",
        "engine": "rocksdb",
        "cell": f"{SERVER}__{alloc}__thp-system__r{rnd}",
    }


def _run(rows: list[dict]) -> Run:
    return Run(Path("/nonexistent"), {"run_id": "t"}, rows)


def test_ratios_are_paired_by_round_with_an_interval_and_a_memory_verdict():
    glibc = {1: 400_000.0, 2: 440_000.0, 3: 420_000.0}
    rows = [_row("glibc", r, v) for r, v in glibc.items()]
    # jemalloc: a steady 0.55x of the same round's glibc (give or take 1%): "less memory"
    je = zip(glibc.items(), (0.55, 0.56, 0.545), strict=True)
    rows += [_row("jemalloc", r, v * f) for (r, v), f in je]
    # tcmalloc: 1.0x within 1%: "none"
    tc = zip(glibc.items(), (1.0, 1.01, 0.995), strict=True)
    rows += [_row("tcmalloc", r, v * f) for (r, v), f in tc]
    rows.append(_row("glibc", 1, 1.0, workload="rww_load"))  # load rows are not the run's RSS
    got = {x["allocator"]: x for x in rss_ratios(_run(rows))}
    assert list(got) == ["glibc", "jemalloc", "tcmalloc"]
    assert got["glibc"]["ratio"] is None and got["glibc"]["rss_kb"] == 420_000.0
    je = got["jemalloc"]
    geo = math.exp(sum(math.log(f) for f in (0.55, 0.56, 0.545)) / 3)
    assert abs(je["ratio"] - geo) < 1e-9
    assert je["lo"] < je["ratio"] < je["hi"] < 1 and je["verdict"] == "less memory"
    tc = got["tcmalloc"]
    assert tc["lo"] < 1 < tc["hi"] and tc["verdict"] == "none"
    table = rss_ratio_table(_run(rows))
    assert table.columns[4:6] == ["95% interval", "verdict"]
    md = table.markdown()
    assert "less memory" in md and "0.55×" in md  # the study's ratio beside ours


def test_one_round_has_a_ratio_but_no_interval_or_verdict():
    rows = [_row("glibc", 1, 400_000.0), _row("jemalloc", 1, 380_000.0)]
    got = {x["allocator"]: x for x in rss_ratios(_run(rows))}
    assert abs(got["jemalloc"]["ratio"] - 0.95) < 1e-9
    assert got["jemalloc"]["lo"] is None and got["jemalloc"]["verdict"] == ""
    assert "0.55×" in rss_ratio_table(_run(rows)).markdown()  # beside MyRocks, the study's ratio
    innodb = [{**r, "server": "mariadb-10.11.19", "engine": "innodb"} for r in rows]
    assert "0.55×" not in rss_ratio_table(_run(innodb)).markdown()  # the study had no InnoDB
    assert "no interval" in " ".join(rss_ratio_table(_run(rows)).notes)


def test_the_header_names_the_rww_load_not_an_unused_dataset():
    from analysis.cell_tables import metadata

    suite = {"suite": {"kind": "rww"}, "rww": {"records": 20000, "value_bytes": 4000}}
    # [dataset] defaults are recorded for every suite; a read-while-writing suite never uses them
    manifest = {"run_id": "t", "suite": {**suite, "dataset": {"tables": 4, "table_size": 10000}}}
    meta = dict(metadata(Run(Path("/nonexistent"), manifest, [])))
    assert meta["load"] == "records=20000, value_bytes=4000" and "dataset" not in meta
