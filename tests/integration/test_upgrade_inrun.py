"""An upgrade check in ONE run (issue 26): the host's MariaDB and the newest older patch of its
Debian release (fetched as a basedir), two allocators, three rounds, every round running every
server x allocator life once. Checked: what ran (each server its own build and dataset, every arm
once a round), and that the verdicts between the servers exist and agree with each other (NEW/BASE
per allocator for throughput, p95 and memory, and the interaction); never how noisy they are."""

from __future__ import annotations

import csv
import math
from collections import Counter
from pathlib import Path

import pytest

from analysis.judge import outcome
from analysis.metrics import METRICS
from analysis.report import write_report
from analysis.sequential import verdict
from servers.acquire import fetch
from suites.families.mysql.server import find_mysql
from tests.integration.roots import CACHE
from tests.integration.runs_helpers import kill_quietly, manifest, small_suite, start_run

pytestmark = pytest.mark.integration

SUITE = small_suite(
    "upgrade-inrun",
    "two servers x two allocators, one short POINT_SELECT level, three rounds",
    allocators={"use": ["glibc", "jemalloc"]},
    warmup={"min_s": 1, "cap_s": 2, "threads": 4},
    sysbench={"workloads": ["point_select"], "threads": [4], "duration_s": 3},
    run={"repeat": 3},
)


def test_two_servers_in_one_run_paired_by_round(out, monkeypatch, older_mariadb, dataset_cache):
    monkeypatch.setenv("MALLOCSWEEP_SERVERS", str(CACHE))
    spec = older_mariadb  # e.g. mariadb-10.11.18 while the host runs 10.11.19
    old, host = fetch.fetch(spec), find_mysql()
    suite = out / "suite.toml"
    suite.write_text(SUITE)
    runs = out / "runs"
    proc = start_run(
        [str(suite), "--out", str(runs), "--servers", f"old=fetched:{spec},new=host"], dataset_cache
    )
    try:
        _, err = proc.communicate(timeout=900)
    finally:
        kill_quietly(proc)
    assert proc.returncode == 0, err
    (run_dir,) = runs.iterdir()
    assert run_dir.name.startswith("upgrade-inrun-old-vs-new-")
    m = manifest(run_dir)

    # what ran: two servers, each its own build, allocators and dataset
    base, new = f"old:mariadb-{old.version}", f"new:mariadb-{host.version}"
    assert [(s["name"], s["label"], s["spec"]) for s in m["servers"]] == [
        ("old", base, f"fetched:{spec}"),
        ("new", new, "host"),
    ]
    assert m["design"]["baseline_server"] == "old"
    keys = [s["datasets"]["innodb"]["key"] for s in m["servers"]]
    assert keys[0].startswith(old.version) and keys[1].startswith(host.version)
    assert all([a["name"] for a in s["allocators"]] == ["glibc", "jemalloc"] for s in m["servers"])
    cells = m["cells"]
    assert len(cells) == 12 and all(c["status"] == "ok" for c in cells), cells
    for rnd in (1, 2, 3):  # every server x allocator arm once a round
        arms = Counter(
            (c["server"]["name"], c["allocator"]["name"]) for c in cells if c["round"] == rnd
        )
        assert arms == Counter({(s, a): 1 for s in ("old", "new") for a in ("glibc", "jemalloc")})
    for c in cells:
        srv = c["server"]
        assert srv["label"] == (base if srv["name"] == "old" else new)
        assert srv["version"] == (old.version if srv["name"] == "old" else host.version)
        assert srv["variables"]["innodb_page_size"] == "16384"  # its own settings, recorded

    # the verdicts between the servers, as verdicts.csv has them
    with (run_dir / "verdicts.csv").open() as f:
        rows = list(csv.DictReader(f))
    between = [r for r in rows if (r["server"], r["baseline_server"]) == (new, base)]
    within = [r for r in rows if r["server"] == r["baseline_server"]]
    assert {r["server"] for r in within} == {base, new}  # each server's allocator verdicts stay
    got = {(r["metric"], r["allocator"]): r for r in between}
    assert set(got) == {
        (metric, a)
        for metric in ("throughput", "lat_p95", "rss_stop", "rss_growth")
        for a in ("glibc", "jemalloc")
    } | {("interaction", "jemalloc")}
    for r in between:
        ratio, lo, hi = float(r["ratio"]), float(r["lo"]), float(r["hi"])
        assert lo <= ratio <= hi and r["rounds"] == "3", r
        assert r["baseline"] == ("glibc" if r["metric"] == "interaction" else r["allocator"])
        # the rule, on the row's own figures, said in the metric's words (lower is better for
        # p95 and memory: the metric table says so)
        metric = METRICS[r["metric"]]
        expected = metric.word(outcome(metric, verdict(ratio, lo, hi, 5.0)))
        assert r["verdict"] == expected, r
    # the interaction is the ratio of the allocators' NEW/BASE ratios (every round paired)
    tp_j, tp_g = (float(got[("throughput", a)]["ratio"]) for a in ("jemalloc", "glibc"))
    inter = float(got[("interaction", "jemalloc")]["ratio"])
    assert math.isclose(inter, tp_j / tp_g, rel_tol=1e-4)

    # the report answers the job first
    _, summary = write_report(Path(run_dir))
    text = summary.read_text()
    assert f"At a glance: did the upgrade change the answer? ({base} → {new})" in text
    assert "| recommended | old: " in text
    vs = [srv["version_string"] for srv in m["servers"]]
    # what differs besides the server, said plainly
    assert "### What differs besides the server" in text
    assert f"| server | mariadb {vs[0]} | mariadb {vs[1]} |" in text
