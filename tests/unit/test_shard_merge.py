"""`--shard K/N` and `merge`: the split, and every refusal of shards that are not one matrix."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from suites.cli.main import main
from suites.errors import SuiteError
from suites.runner.merge import merge_shards
from suites.runner.plan import plan_cells
from suites.runner.shard import Shard, parse_shard

ALLOCS = ["glibc", "jemalloc", "tcmalloc"]


@pytest.mark.parametrize(
    ("spec", "why"),
    [("3/2", "between 1 and 2"), ("0/2", "between 1 and 2"), ("1/0", "at least 1"),
     ("two/3", "expected K/N"), ("1/2/3", "expected K/N"), ("", "expected K/N")],
)  # fmt: skip
def test_bad_shard_specs(spec, why):
    with pytest.raises(SuiteError, match=why) as e:
        parse_shard(spec)
    assert "\n" not in str(e.value) and f"--shard {spec}" in str(e.value)


@pytest.mark.parametrize("spec", ["3/2", "0/2"])
def test_bad_shard_spec_on_the_command_line_is_exit_2(spec, capsys, tmp_path):
    suite = tmp_path / "s.toml"
    suite.write_text("")
    assert main(["run", str(suite), "--shard", spec, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mallocsweep: error: --shard {spec}: ")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("repeat", "n"), [(2, 2), (5, 2), (6, 3), (7, 3), (4, 4)])
def test_shards_are_whole_rounds_that_cover_the_plan_once(repeat, n):
    cells = plan_cells("mariadb-10.11", ALLOCS, ["never", "always"], repeat)
    parts = [Shard(k, n).select(cells, repeat) for k in range(1, n + 1)]
    ids = [c.id for p in parts for c in p]
    assert sorted(ids) == sorted(c.id for c in cells) and len(set(ids)) == len(ids)
    per_round = len(ALLOCS) * 2
    for p in parts:
        rounds = {c.round for c in p}
        # whole rounds only: each holds every (thp, allocator) of its round, in the plan's order
        assert len(p) == per_round * len(rounds)
        assert [c.index for c in p] == sorted(c.index for c in p)
    # rounds dealt like a snake: every shard of two or more rounds runs the allocator list both
    # forwards (odd rounds) and backwards (even rounds)
    if repeat >= 2 * n:
        assert all({c.round % 2 for c in p} == {0, 1} for p in parts)


def test_snake_dealing():
    assert [Shard(k, 2).rounds(6) for k in (1, 2)] == [[1, 4, 5], [2, 3, 6]]
    assert [Shard(k, 3).rounds(6) for k in (1, 2, 3)] == [[1, 6], [2, 5], [3, 4]]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_more_shards_than_rounds_is_refused_for_every_k(k):
    # shard 1 of 3 would otherwise run 1 of 2 rounds and shard 3 none: the same rule for every K
    cells = plan_cells("m", ALLOCS, ["system"], 2)
    with pytest.raises(SuiteError, match="3 shards need at least 3 rounds .* has 2"):
        Shard(k, 3).select(cells, 2)


# -- merge -----------------------------------------------------------------------------------------

HOST = {
    "hostname": "db1",
    "machine": "x86_64",
    "cpu_model": "Xeon",
    "cpu_count": 64,
    "cpu_usable": 64,
    "kernel": "6.1.0",
    "kernel_version": "#1 SMP",
    "memory_kb": 263_000_000,
    "glibc_version": "2.36",
    "thp": {"enabled": "madvise", "defrag": "madvise"},
}


def _shard(root: Path, k: int, n: int = 2, repeat: int = 2, **changes) -> Path:
    """A shard's run directory with real cell ids of the plan (no figures: merge reads none)."""
    cells = plan_cells("mariadb-10.11.19", ["glibc", "jemalloc"], ["system"], repeat)
    shard = Shard(k, n)
    mine = shard.select(cells, repeat)
    d = root / f"shard{k}-{len(list(root.iterdir()))}"
    for sub in ("cells", "samples", "logs"):
        (d / sub).mkdir(parents=True)
    m = {
        "format_version": 2,
        "tool": {"name": "mallocsweep", "version": "0.1.0"},
        "run_id": d.name,
        "status": "finished",
        "started_at": f"2026-11-24T00:0{k}:00+00:00",
        "finished_at": f"2026-11-24T00:1{k}:00+00:00",
        "host": copy.deepcopy(HOST),
        "suite": {"suite": {"name": "s"}, "sysbench": {"duration_s": 3}, "run": {"out": str(d)}},
        "allocators": [{"name": "glibc", "version": "2.36"}, {"name": "jemalloc", "version": "5.3"}],
        "shard": shard.to_manifest(cells, repeat),
        "cells": [
            {"id": c.id, "index": c.index, "round": c.round, "status": "ok",
             "server": {"label": c.server_label}}
            for c in mine
        ],
    }  # fmt: skip
    for key, value in changes.items():
        target = m
        *path, last = key.split("__")
        for p in path:
            target = target[p]
        target[last] = value
    (d / "manifest.json").write_text(json.dumps(m))
    (d / "logs" / "dataset").mkdir()  # every shard prepares its own dataset
    (d / "logs" / "dataset" / "prepare.log").write_text("prepared\n")
    for c in m["cells"]:
        (d / "cells" / f"{c['id']}.json").write_text(json.dumps({"cell": c, "rows": []}))
        (d / "samples" / f"{c['id']}.csv").write_text("t_s\n")
        (d / "logs" / c["id"]).mkdir()
        (d / "logs" / c["id"] / "x.log").write_text("log\n")
    return d


def test_two_shards_merge_into_the_whole_plan(tmp_path):
    a, b = _shard(tmp_path, 1), _shard(tmp_path, 2, host__hostname="db2")
    out, noted = merge_shards([b, a], tmp_path / "merged")
    m = json.loads((out / "manifest.json").read_text())
    assert [c["index"] for c in m["cells"]] == [0, 1, 2, 3]
    assert [s["index"] for s in m["merged"]["shards"]] == [1, 2]
    assert "shard" not in m and m["status"] == "finished"
    assert (m["started_at"], m["finished_at"]) == (
        "2026-11-24T00:01:00+00:00",
        "2026-11-24T00:12:00+00:00",
    )
    assert noted == ["host hostname differs: 'db1' (shard 1/2) vs 'db2' (shard 2/2)"]
    assert m["merged"]["host_differences"] == noted
    assert len(list((out / "cells").glob("*.json"))) == 4
    assert sorted(p.name for p in (out / "logs").iterdir() if not p.name.startswith("mariadb")) == [
        "dataset.shard1",
        "dataset.shard2",
    ]
    assert len(list((out / "logs").glob("mariadb*"))) == 4
    assert (out / "results.csv").read_text().startswith("cell,")
    assert (a / "manifest.json").is_file()  # the shards stay as they were


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"suite__sysbench": {"duration_s": 5}}, "from a different suite"),
        ({"tool": {"name": "mallocsweep", "version": "0.2.0"}}, "tool version"),
        ({"host__cpu_model": "EPYC"}, "different host kinds: cpu_model"),
        ({"host__cpu_count": 32}, "different host kinds: cpu_count"),
        ({"host__kernel": "6.12.0"}, "different host kinds: kernel"),
        ({"host__memory_kb": 131_000_000}, "different host kinds: memory_kb"),
        ({"host__thp": {"enabled": "always", "defrag": "madvise"}}, "system THP enabled"),
        ({"allocators": [{"name": "glibc", "version": "2.36"},
                         {"name": "jemalloc", "version": "5.2"}]}, "allocator jemalloc differs"),
        ({"status": "interrupted"}, "is interrupted"),
    ],
)  # fmt: skip
def test_merge_refuses_shards_of_different_measurements(tmp_path, changes, why):
    a, b = _shard(tmp_path, 1), _shard(tmp_path, 2, **changes)
    with pytest.raises(SuiteError, match=why) as e:
        merge_shards([a, b], tmp_path / "merged")
    assert "\n" not in str(e.value)
    assert not (tmp_path / "merged").exists()


def test_memory_within_two_percent_is_the_same_kind_of_host(tmp_path):
    a, b = _shard(tmp_path, 1), _shard(tmp_path, 2, host__memory_kb=262_000_000)
    _, noted = merge_shards([a, b], tmp_path / "merged")
    assert any("memory_kb differs" in n for n in noted)


def test_merge_refuses_overlapping_missing_and_self(tmp_path):
    a = _shard(tmp_path, 1)
    a2 = _shard(tmp_path, 1)
    b3 = _shard(tmp_path, 2, n=3, repeat=3)
    with pytest.raises(SuiteError, match="merged with itself"):
        merge_shards([a, a], tmp_path / "m")
    with pytest.raises(SuiteError, match="overlapping shards"):
        merge_shards([a, a2], tmp_path / "m")
    with pytest.raises(SuiteError, match="different splits"):
        merge_shards([a, b3], tmp_path / "m")
    three = [_shard(tmp_path, k, n=3, repeat=3) for k in (1, 3)]
    with pytest.raises(SuiteError, match=r"shard\(s\) 2/3 missing"):
        merge_shards(three, tmp_path / "m")
    with pytest.raises(SuiteError, match="at least two"):
        merge_shards([a], tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_merge_refuses_a_run_that_is_not_a_shard_and_an_existing_out(tmp_path):
    a, b = _shard(tmp_path, 1), _shard(tmp_path, 2)
    m = json.loads((b / "manifest.json").read_text())
    del m["shard"]
    (b / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(SuiteError, match="not a shard"):
        merge_shards([a, b], tmp_path / "m")
    (tmp_path / "taken").mkdir()
    b2 = _shard(tmp_path, 2)
    with pytest.raises(SuiteError, match="already exists"):
        merge_shards([a, b2], tmp_path / "taken")
    with pytest.raises(SuiteError, match="no manifest.json"):
        merge_shards([a, tmp_path / "taken"], tmp_path / "m")


def test_merge_on_the_command_line_is_one_line_exit_2(tmp_path, capsys):
    a = _shard(tmp_path, 1)
    assert main(["merge", str(a), str(a), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "merged with itself" in err[0]


def test_shards_started_in_the_same_second_on_two_hosts_are_not_one_run(tmp_path):
    a = _shard(tmp_path, 1)
    name = json.loads((a / "manifest.json").read_text())["run_id"]
    b = _shard(tmp_path, 2, run_id=name, started_at="2026-11-24T00:01:00+00:00")
    out, _ = merge_shards([a, b], tmp_path / "merged")
    assert len(json.loads((out / "manifest.json").read_text())["cells"]) == 4
