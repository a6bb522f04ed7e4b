"""Tables, report.html and summary.md on the recorded REAL run directories: every figure checked
against what this test recomputes from results.csv on its own (csv module, statistics module)."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
from pathlib import Path

import pytest

from analysis import hugepage_tables, memory, point_tables
from analysis.report import write_report
from analysis.table_model import fmt
from rundir.read import load_run
from tests.unit.test_analysis_report import parse

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
T975 = {1: 12.7062, 2: 4.30265, 3: 3.18245, 4: 2.77645}  # Student t, 97.5% quantile, by df


def raw_rows(name: str) -> list[dict]:
    with (RUNS / name / "results.csv").open() as f:
        return list(csv.DictReader(f))


def values(rows, col, **match) -> list[float]:
    return [
        float(r[col])
        for r in rows
        if all(r[k] == str(v) for k, v in match.items()) and r["status"] == "ok"
    ]


def cells_of(rows, **match) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        if all(r[k] == str(v) for k, v in match.items()):
            out.setdefault(r["cell"], []).append(r)
    return out


def log_t_interval(xs: list[float]) -> tuple[float, float]:
    logs = [math.log(x) for x in xs]
    half = T975[len(xs) - 1] * statistics.stdev(logs) / math.sqrt(len(xs))
    mean = statistics.fmean(logs)
    return math.exp(mean - half), math.exp(mean + half)


# -- pivot tables: p95, p99, throughput ------------------------------------------------------------
@pytest.mark.parametrize("name", ["real-smoke-1", "real-regress-base-a", "real-thp-small"])
@pytest.mark.parametrize("pct", ["p95", "p99"])
def test_latency_tables_equal_results_csv(name, pct):
    run, rows = load_run(RUNS / name), raw_rows(name)
    for wl in run.workloads:
        t = point_tables.latency_table(run, wl, pct)
        thp_col = "THP" in t.columns
        for row in t.rows:
            alloc = row[0].value
            thp = row[1].value if thp_col else run.thp_modes[0]
            for th in run.threads(wl):
                cell = row[t.columns.index(f"{th} thr")]
                xs = values(
                    rows, f"lat_{pct}_ms", allocator=alloc, thp=thp, workload=wl, threads=th
                )
                assert cell.value == pytest.approx(statistics.median(xs))
                if len(xs) > 1:
                    lo, hi = log_t_interval(xs)
                    assert cell.ci == f"[{fmt(lo)}–{fmt(hi)}]"
                else:
                    assert cell.ci == ""


def test_repeated_throughput_shows_median_and_interval_in_html_and_markdown(tmp_path):
    copy = shutil.copytree(RUNS / "real-regress-base-a", tmp_path / "run")
    html, md = write_report(copy)
    qps = values(raw_rows("real-regress-base-a"), "qps", threads=4)
    assert len(qps) == 5
    lo, hi = log_t_interval(qps)
    want = f"{fmt(statistics.median(qps))}[{fmt(lo)}–{fmt(hi)}]"
    page = parse(html.read_text())
    row = page.tables["throughput-point_select"][1]
    assert row[0] == "glibc" and row[1].replace(" ⚠", "").startswith(want)  # not only on hover
    assert f"| glibc | {fmt(statistics.median(qps))} [{fmt(lo)}–{fmt(hi)}]" in md.read_text()


# -- memory --------------------------------------------------------------------------------------
def manifest_cells(name: str) -> dict[str, dict]:
    return {c["id"]: c for c in json.loads((RUNS / name / "manifest.json").read_text())["cells"]}


def recorded_memory(name: str, cell_id: str, rows: list[dict]) -> dict[str, float]:
    """A cell's memory figures as this test reads them: the manifest's server start/stop readings
    when the run has them (newer runs), else the first and last measured level in results.csv."""
    mem = manifest_cells(name)[cell_id].get("memory")
    huge = max(float(r["anon_huge_kb"]) for r in rows)
    if mem:
        start, stop = mem["server_start"], mem["server_stop"]
        return {
            "RSS start": start["rss_kb"],
            "RSS end": stop["rss_kb"],
            "VSZ start": start["vsz_kb"],
            "VSZ end": stop["vsz_kb"],
            "peak RSS": stop["hwm_kb"],
            "AnonHugePages": max(huge, start["anon_huge_kb"], stop["anon_huge_kb"]),
        }
    return {
        "RSS start": float(rows[0]["rss_start_kb"]),
        "RSS end": float(rows[-1]["rss_end_kb"]),
        "VSZ start": float(rows[0]["vsz_start_kb"]),
        "VSZ end": float(rows[-1]["vsz_end_kb"]),
        "peak RSS": max(float(r["rss_peak_kb"]) for r in rows),
        "AnonHugePages": huge,
    }


@pytest.mark.parametrize(
    "name,basis",
    [
        ("real-smoke-1", "levels"),
        ("real-regress-base-a", "levels"),
        ("real-thp-small", "server"),
        ("real-smoke-windows", "server"),
    ],
)
def test_memory_table_equals_results_csv_or_manifest(name, basis):
    run, rows = load_run(RUNS / name), raw_rows(name)
    assert memory.memory_basis(run) == basis
    t = memory.memory_table(run)
    assert ("server start to shutdown" in t.title) == (basis == "server")
    thp_col = "THP" in t.columns
    for row in t.rows:
        alloc = row[0].value
        match = {"allocator": alloc}
        if thp_col:
            match["thp"] = row[1].value
        figs = [recorded_memory(name, cid, c) for cid, c in cells_of(rows, **match).items()]

        def med(f, figs=figs):
            return statistics.median(f(c) for c in figs) / 1024

        want = {k: med(lambda c, k=k: c[k]) for k in figs[0]}
        want["RSS growth"] = med(lambda c: c["RSS end"] - c["RSS start"])
        want["VSZ growth"] = med(lambda c: c["VSZ end"] - c["VSZ start"])
        for col, v in want.items():
            assert row[t.columns.index(col)].value == pytest.approx(v), (name, alloc, col)


# -- hugepages (real THP always vs never) ----------------------------------------------------------
def test_hugepage_table_equals_results_csv():
    run, rows = load_run(RUNS / "real-thp-small"), raw_rows("real-thp-small")
    t = hugepage_tables.hugepage_table(run, "point_select")
    cols = t.columns
    assert len(t.rows) == 4
    for row in t.rows:
        alloc, mode = row[0].value, row[1].value

        def qps(m, th, alloc=alloc):
            (x,) = values(rows, "qps", allocator=alloc, thp=m, threads=th)
            return x

        for th in (4, 16):
            assert row[cols.index(f"{th} thr")].value == pytest.approx(
                qps(mode, th) / qps("never", th)
            )
        (p99,) = values(rows, "lat_p99_ms", allocator=alloc, thp=mode, threads=16)
        assert row[cols.index("p99 ms @16")].value == pytest.approx(p99)
        ((cid, cell),) = cells_of(rows, allocator=alloc, thp=mode).items()
        mem = recorded_memory("real-thp-small", cid, cell)  # server start/stop, as the memory table
        growth = (mem["RSS end"] - mem["RSS start"]) / 1024
        assert row[cols.index("RSS growth, whole cell (MB)")].value == pytest.approx(growth)
        huge = mem["AnonHugePages"] / 1024  # levels, server start and stop
        assert row[cols.index("AnonHugePages, cell max (MB)")].value == pytest.approx(huge)
        assert (huge > 0) == (mode == "always")  # the buffer pool got huge pages under always
        assert row[cols.index("THP in force")].value == f"enabled={mode}, defrag=madvise"


def test_thp_cell_counters_are_level_sums_of_results_csv():
    run, rows = load_run(RUNS / "real-thp-small"), raw_rows("real-thp-small")
    t = hugepage_tables.thp_cells_table(run)
    for row in t.rows:
        cell = [r for r in rows if r["cell"] == row[0].value]
        for col in ("thp_fault_alloc", "thp_collapse_alloc"):
            shown = col.removeprefix("thp_")
            assert row[t.columns.index(shown)].value == sum(float(r[col]) for r in cell)
        assert row[t.columns.index("process THP")].text == "0"
    always = [r for r in t.rows if r[1].value == "always"]
    assert all(r[t.columns.index("fault_alloc")].value > 0 for r in always)
    reach = t.columns.index("huge pages could reach")
    assert {r[1].value: r[reach].text for r in t.rows} == {
        "always": "buffer pool only (server opted out)",
        "never": "none (system never)",
    }


# -- the server's own THP opt-out on a single-mode run ---------------------------------------------
def test_single_mode_run_shows_the_servers_thp_opt_out(tmp_path):
    """real-smoke-1 ran under the system's madvise; mariadbd reported THP_enabled 0 in every cell."""
    rows = raw_rows("real-smoke-1")
    assert {r["process_thp_enabled"] for r in rows} == {"0"}
    copy = shutil.copytree(RUNS / "real-smoke-1", tmp_path / "run")
    html, md = write_report(copy)
    page = parse(html.read_text())
    text = " ".join(" ".join(page.text).split())
    assert "The server disabled THP for itself" in text and "In 2 of 2 cell(s)" in text
    cells = page.tables["thp-cells"]
    # process THP per cell (glibc, jemalloc), flagged: the mode in force implied 1
    assert [r[4] for r in cells[1:]] == ["0 ⚠"] * 2
    assert all(r[3] == "enabled=madvise, defrag=madvise" for r in cells[1:])
    assert "Hugepage impact" not in text  # one mode: nothing to put side by side
    md_text = md.read_text()
    assert "The server disabled THP for itself" in md_text and "THP per cell" in md_text


# -- summary.md --------------------------------------------------------------------------------------
def md_table(md: str, title: str) -> list[list[str]]:
    """The first Markdown table after the heading `### title`, as rows of cell texts."""
    lines = md.split(f"### {title}", 1)[1].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [
        [c.strip() for c in ln.strip("|").split("|")]
        for ln in lines[start:end]
        if not ln.startswith("|---")
    ]


def test_summary_md_numbers_equal_results_csv(tmp_path):
    copy = shutil.copytree(RUNS / "real-smoke-1", tmp_path / "run")
    _, md_path = write_report(copy)
    md, rows = md_path.read_text(), raw_rows("real-smoke-1")
    for wl in ("oltp_ro", "point_select"):
        thr = md_table(md, f"{wl}: throughput (queries/s) by allocator and client threads")
        p99 = md_table(md, f"{wl}: p99 latency (ms) by allocator and client threads")
        assert thr[0] == p99[0] == ["allocator", "4 thr", "16 thr"]
        for table, col in ((thr, "qps"), (p99, "lat_p99_ms")):
            for line in table[1:]:
                alloc = line[0]
                for th, text in zip((4, 16), line[1:], strict=True):
                    (x,) = values(rows, col, allocator=alloc, workload=wl, threads=th)
                    assert re.match(re.escape(fmt(x)) + r"( |$)", text), (wl, col, text)
    mem = md_table(md, "Server memory (MB) by allocator: start, end and growth")
    header = mem[0]
    for line in mem[1:]:
        (cell,) = cells_of(rows, allocator=line[0]).values()
        growth = (float(cell[-1]["rss_end_kb"]) - float(cell[0]["rss_start_kb"])) / 1024
        assert line[header.index("RSS growth")] == fmt(growth)
        assert line[header.index("VSZ end")] == fmt(float(cell[-1]["vsz_end_kb"]) / 1024)


def test_prctl_never_is_displayed_as_such_and_a_prctl_that_did_not_take_is_warned(tmp_path):
    copy = shutil.copytree(RUNS / "real-thp-small", tmp_path / "run")
    m = json.loads((copy / "manifest.json").read_text())
    for c in m["cells"]:
        if c["thp"]["requested"] == "never":  # as recorded without sysfs write access
            c["thp"].update(
                method="prctl",
                in_force={"enabled": "never (prctl)", "defrag": "madvise"},
                system={"enabled": "madvise", "defrag": "madvise"},
            )
            if c["allocator"]["name"] == "jemalloc":
                c["thp"]["process_thp_enabled"] = 1  # the prctl did not take
    (copy / "manifest.json").write_text(json.dumps(m))
    run = load_run(copy)
    t = hugepage_tables.thp_cells_table(run)
    by_alloc = {
        (r[0].value.split("__")[1], r[1].value): [c.text + (" ⚠" if c.warn else "") for c in r]
        for r in t.rows
        if r[1].value == "never"
    }
    glibc, jem = by_alloc[("glibc", "never")], by_alloc[("jemalloc", "never")]
    assert glibc[3] == "never (prctl, per server; system enabled=madvise)"
    assert glibc[2] == "prctl (this server only)" and glibc[4] == "0"  # as expected: no flag
    assert jem[4] == "1 ⚠" and jem[5] == "all of it (our prctl did not take)"
    _, md = write_report(copy)
    assert "THP 'never' by prctl did not take in 1 cell(s)" in md.read_text()


# -- CPU and context switches per operation --------------------------------------------------------
@pytest.mark.parametrize(
    "name,windows",
    [("real-smoke-windows", True), ("real-thp-small", True), ("real-smoke-1", False)],
)
def test_per_op_tables_equal_the_recorded_columns(name, windows):
    """Per-op figures are results.csv's own columns (over the measured window in newer runs),
    never recomputed from the level's totals; the note says which stretch they cover."""
    run, rows = load_run(RUNS / name), raw_rows(name)
    assert run.has_windows == windows
    for wl in run.workloads:
        cpu, csw = point_tables.efficiency_tables(run, wl)
        for t, col in ((cpu, "cpu_us_per_op"), (csw, "ctxsw_per_op")):
            thp_col = "THP" in t.columns
            for row in t.rows:
                match = {"allocator": row[0].value, "workload": wl}
                if thp_col:
                    match["thp"] = row[1].value
                for th in run.threads(wl):
                    xs = values(rows, col, threads=th, **match)
                    cell = row[t.columns.index(f"{th} thr")]
                    assert cell.value == pytest.approx(statistics.median(xs)), (name, wl, col)
        note = cpu.notes[0]  # said once, under the CPU table; the ctxsw table points to it
        assert csw.notes[0] == "Window: the same measured window as the CPU table above."
        if windows:
            ws = [float(r["window_s"]) for r in rows if r["workload"] == wl]
            assert note.startswith("Window: CPU and context switches are counted over")
            assert f"windows lasted {fmt(statistics.median(ws))} s" in note
        else:
            assert "predates measured windows" in note


def test_window_figures_are_the_windows_own():
    """In the new recording, cpu_us_per_op is the window's CPU over the window's operations."""
    rows = raw_rows("real-smoke-windows")
    assert {r["ctxsw_source"] for r in rows} == {"perf"}
    for r in rows:
        cpu = float(r["cpu_user_s"]) + float(r["cpu_sys_s"])
        ops = float(r["window_ops"])
        # cpu_*_s are rounded to 10 ms by the collectors: compare at that resolution
        assert float(r["cpu_us_per_op"]) == pytest.approx(cpu * 1e6 / ops, abs=0.011e6 / ops)
        assert float(r["cpu_s_per_1m_ops"]) == float(r["cpu_us_per_op"])
        csw = int(r["ctxsw_voluntary"]) + int(r["ctxsw_involuntary"])
        assert float(r["ctxsw_per_1m_ops"]) == pytest.approx(csw * 1e6 / ops, rel=1e-4)
        assert float(r["window_s"]) < float(r["duration_s"])
