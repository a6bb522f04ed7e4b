"""Tables and the report on synthetic run directories: figures equal results.csv, HTML is whole."""

from __future__ import annotations

import statistics
from html.parser import HTMLParser

import pytest
from fixtures.make_runs import make_run

from analysis import cell_tables, hugepage_tables, memory, point_tables
from analysis.report import write_report
from analysis.stats import median_ci
from analysis.table_model import fmt
from rundir.read import load_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return {
        "plain": make_run(root, "synthetic-plain", seed=1),
        "rep": make_run(root, "synthetic-rep", seed=2, repeats=3),
        "thp": make_run(
            root,
            "synthetic-thp",
            seed=3,
            allocators=("glibc", "jemalloc"),
            thp_modes=("always", "never"),
            threads=(8, 64),
        ),
        "failed": make_run(
            root,
            "synthetic-failed",
            seed=4,
            failed_cells=("tcmalloc",),
            failed_levels=("point_select@64",),
        ),
        "iibench": make_run(
            root, "synthetic-iibench", seed=5, workloads=("iibench",), threads=(10,)
        ),
        "standin": make_run(
            root,
            "synthetic-standin",
            seed=6,
            allocators=("glibc",),
            workloads=("iibench",),
            threads=(10,),
            standin=True,
        ),
    }


class Page(HTMLParser):
    """Collects what the tests check: text, tables by section id, resource URLs; checks nesting."""

    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self):
        super().__init__()
        self.stack, self.text, self.urls, self.tables = [], [], [], {}
        self._section, self._row, self._cell = None, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag not in self.VOID:
            self.stack.append(tag)
        for k in ("src", "href"):
            if a.get(k):
                self.urls.append(a[k])
        if tag == "section" and a.get("id"):
            self._section = a["id"]
            self.tables.setdefault(self._section, [])
        elif tag == "tr" and self._section:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1:]}>"
        self.stack.pop()
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._section].append(self._row)
            self._row = None
        elif tag == "section":
            self._section = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    p.close()
    assert p.stack == [], f"unclosed tags: {p.stack}"
    return p


# -- tables ---------------------------------------------------------------------------------------
def test_throughput_table_equals_results_csv(runs):
    run = load_run(runs["plain"])
    t = point_tables.throughput_table(run, "oltp_ro")
    assert t.columns == ["allocator", "8 thr", "16 thr", "32 thr", "64 thr"]
    for row in t.rows:
        alloc = row[0].value
        for th, cell in zip((8, 16, 32, 64), row[1:], strict=True):
            expected = next(
                r["qps"]
                for r in run.rows
                if r["allocator"] == alloc and r["threads"] == th and r["workload"] == "oltp_ro"
            )
            assert cell.value == expected
            glibc = next(
                r["qps"]
                for r in run.rows
                if r["allocator"] == "glibc" and r["threads"] == th and r["workload"] == "oltp_ro"
            )
            if alloc != "glibc":
                assert cell.note == f"{expected / glibc:.2f}× glibc"


def test_repeats_are_medians_with_intervals(runs):
    run = load_run(runs["rep"])
    t = point_tables.throughput_table(run, "point_select")
    cell = t.rows[1][4]  # jemalloc at 64 threads
    vals = [
        r["qps"]
        for r in run.rows
        if r["allocator"] == "jemalloc" and r["threads"] == 64 and r["workload"] == "point_select"
    ]
    assert len(vals) == 3
    assert cell.value == statistics.median(vals)
    ci = median_ci(vals)
    assert cell.ci == f"[{fmt(ci.lo)}–{fmt(ci.hi)}]"  # shown beside the value, not only on hover
    assert ci.lo < min(vals) and ci.hi > max(vals)  # 3 values: a t interval is wider than them
    assert "95% confidence interval" in cell.title
    assert "[" in t.markdown().split("\n")[3]  # Markdown shows it too
    assert any("95% confidence interval" in n for n in t.notes)


def test_latency_and_efficiency_tables_equal_results_csv(runs):
    run = load_run(runs["plain"])
    lat = point_tables.latency_table(run, "point_select", "p99")
    cpu, csw = point_tables.efficiency_tables(run, "point_select")
    for t, col in ((lat, "lat_p99_ms"), (cpu, "cpu_us_per_op"), (csw, "ctxsw_per_op")):
        got = {
            (row[0].value, th): c.value
            for row in t.rows
            for th, c in zip((8, 16, 32, 64), row[1:], strict=True)
        }
        want = {
            (r["allocator"], r["threads"]): r[col]
            for r in run.rows
            if r["workload"] == "point_select"
        }
        assert got == want
    assert cpu.notes[0].startswith("Window: CPU and context switches are counted over")
    assert "11.0 s (median) of levels lasting 12.0 s" in cpu.notes[0]  # window_s, duration_s


def test_memory_table_start_end_growth(runs):
    """Server start/stop readings from the manifest (peak: VmHWM at stop), said in the caption."""
    run = load_run(runs["plain"])
    t = memory.memory_table(run)
    assert "server start to shutdown" in t.title and "first answered" in t.explain
    jem = next(r for r in t.rows if r[0].value == "jemalloc")
    (cell,) = [c for c in run.cells.values() if c["allocator"]["name"] == "jemalloc"]
    start, stop = cell["memory"]["server_start"], cell["memory"]["server_stop"]
    cols = t.columns
    assert jem[cols.index("RSS start")].value == start["rss_kb"] / 1024
    assert jem[cols.index("RSS end")].value == stop["rss_kb"] / 1024
    assert jem[cols.index("RSS growth")].value == (stop["rss_kb"] - start["rss_kb"]) / 1024
    assert jem[cols.index("VSZ start")].value == start["vsz_kb"] / 1024
    assert jem[cols.index("VSZ growth")].value == (stop["vsz_kb"] - start["vsz_kb"]) / 1024
    assert jem[cols.index("peak RSS")].value == stop["hwm_kb"] / 1024
    # server start is before warmup: it differs from the first level's start
    rows = [r for r in run.rows if r["allocator"] == "jemalloc"]
    assert start["rss_kb"] < rows[0]["rss_start_kb"]


def test_memory_table_of_an_older_run_uses_the_levels(tmp_path):
    run = load_run(make_run(tmp_path, "synthetic-legacy", seed=1, legacy=True))
    t = memory.memory_table(run)
    assert "measured levels" in t.title and "predates the server start/stop" in t.explain
    jem = next(r for r in t.rows if r[0].value == "jemalloc")
    rows = [r for r in run.rows if r["allocator"] == "jemalloc"]
    start, end = rows[0]["rss_start_kb"], rows[-1]["rss_end_kb"]
    cols = t.columns
    assert jem[cols.index("RSS start")].value == start / 1024
    assert jem[cols.index("RSS end")].value == end / 1024
    assert jem[cols.index("RSS growth")].value == (end - start) / 1024
    assert jem[cols.index("peak RSS")].value == max(r["rss_peak_kb"] for r in rows) / 1024


def test_iibench_table_per_million_rows(runs):
    """Recorded window rates (not all rows / whole level); rows/s is qps, batches/s is tps."""
    run = load_run(runs["iibench"])
    t = point_tables.iibench_table(run)
    r = next(x for x in run.rows if x["allocator"] == "glibc")
    row = t.rows[0]
    assert row[0].value == "glibc"
    assert row[t.columns.index("rows")].value == r["events"]
    assert row[t.columns.index("rows/s")].value == r["qps"]
    assert row[t.columns.index("batches/s")].value == r["tps"]
    assert r["qps"] == pytest.approx(r["tps"] * 100, rel=1e-3)  # 100 rows per batch
    assert row[t.columns.index("ctxsw per 1M rows")].value == r["ctxsw_per_1m_ops"]
    assert row[t.columns.index("CPU s per 1M rows")].value == r["cpu_s_per_1m_ops"]
    # ...which is the window's figures over the window's rows, not the old all-rows division
    per_m = (r["ctxsw_voluntary"] + r["ctxsw_involuntary"]) / r["window_ops"] * 1e6
    assert r["ctxsw_per_1m_ops"] == pytest.approx(per_m, rel=1e-4)
    assert r["ctxsw_per_1m_ops"] != pytest.approx(
        (r["ctxsw_voluntary"] + r["ctxsw_involuntary"]) / r["events"] * 1e6, rel=1e-3
    )
    assert any("measured window" in n for n in t.notes)
    tp = point_tables.throughput_table(run, "iibench")
    assert "rows inserted/s" in tp.title and "queries" not in tp.title


def test_iibench_table_of_an_older_run_divides_by_all_rows(tmp_path):
    run = load_run(
        make_run(tmp_path, "synthetic-ii-old", seed=5, workloads=("iibench",), threads=(10,),
                 legacy=True)
    )  # fmt: skip
    assert not run.has_windows
    t = point_tables.iibench_table(run)
    r = next(x for x in run.rows if x["allocator"] == "glibc")
    row = t.rows[0]
    per_m = (r["ctxsw_voluntary"] + r["ctxsw_involuntary"]) / r["events"] * 1e6
    assert row[t.columns.index("ctxsw per 1M rows")].value == pytest.approx(per_m)
    cpu_m = (r["cpu_user_s"] + r["cpu_sys_s"]) / r["events"] * 1e6
    assert row[t.columns.index("CPU s per 1M rows")].value == pytest.approx(cpu_m)
    assert any("predates measured windows" in n for n in t.notes)


def test_procfs_context_switches_are_flagged_not_shown(tmp_path):
    """A cell without perf: its context-switch cells are empty, flagged, and explained."""
    path = make_run(tmp_path, "synthetic-procfs", seed=7, ctxsw_procfs=("jemalloc",))
    run = load_run(path)
    _, csw = point_tables.efficiency_tables(run, "point_select")
    jem = next(r for r in csw.rows if r[0].value == "jemalloc")
    glibc = next(r for r in csw.rows if r[0].value == "glibc")
    assert all(c.value is None and c.warn and c.note == "live threads only" for c in jem[1:])
    assert all("live threads" in c.title for c in jem[1:])
    assert all(c.value is not None and not c.warn for c in glibc[1:])
    assert any(n.startswith("⚠ live threads only:") for n in csw.notes)
    # CPU is unaffected by the context-switch source
    cpu, _ = point_tables.efficiency_tables(run, "point_select")
    assert all(
        c.value is not None for c in next(r for r in cpu.rows if r[0].value == "jemalloc")[1:]
    )
    ii = load_run(make_run(tmp_path, "synthetic-ii-procfs", seed=8, workloads=("iibench",),
                           threads=(10,), ctxsw_procfs=("glibc",)))  # fmt: skip
    t = point_tables.iibench_table(ii)
    cell = t.rows[0][t.columns.index("ctxsw per 1M rows")]
    assert t.rows[0][0].value == "glibc" and cell.value is None and cell.note == "live threads only"
    html, md = write_report(path)
    assert "live threads only" in html.read_text() and "⚠ live threads only:" in md.read_text()


def test_level_without_a_window_is_flagged(tmp_path):
    run = load_run(make_run(tmp_path, "synthetic-nowin", seed=9, no_window_levels=("oltp_ro@8",)))
    cpu, csw = point_tables.efficiency_tables(run, "oltp_ro")
    for t in (cpu, csw):
        at8 = t.column("8 thr")
        assert all(c.value is None and c.note == "no window" for c in at8)
        assert all(c.value is not None for c in t.column("16 thr"))
        assert any(n.startswith("⚠ no window:") for n in t.notes)
    assert cpu.notes[0].endswith("over the 9 of 12 levels that had one.")  # 3 allocators x 4


def test_hugepage_table_only_with_several_modes(runs):
    assert hugepage_tables.hugepage_table(load_run(runs["plain"]), "oltp_ro") is None
    run = load_run(runs["thp"])
    t = hugepage_tables.hugepage_table(run, "oltp_ro")
    cols = t.columns
    for row in t.rows:
        alloc, mode = row[0].value, row[1].value
        for th in (8, 64):

            def qps(m, alloc=alloc, th=th):
                return next(
                    r["qps"]
                    for r in run.rows
                    if (r["allocator"], r["thp"], r["threads"], r["workload"])
                    == (alloc, m, th, "oltp_ro")
                )

            # the ratio to the same allocator under `never`, recomputed from results.csv
            assert row[cols.index(f"{th} thr")].value == pytest.approx(qps(mode) / qps("never"))
        rows = [r for r in run.rows if (r["allocator"], r["thp"]) == (alloc, mode)]
        p99 = next(
            r["lat_p99_ms"] for r in rows if r["threads"] == 64 and r["workload"] == "oltp_ro"
        )
        assert row[cols.index("p99 ms @64")].value == p99
        mem = run.cell(rows[0]["cell"])["memory"]  # as the memory table: server start to stop
        growth = (mem["server_stop"]["rss_kb"] - mem["server_start"]["rss_kb"]) / 1024
        assert row[cols.index("RSS growth, whole cell (MB)")].value == pytest.approx(growth)
        huge = max(r["anon_huge_kb"] for r in rows) / 1024
        assert row[cols.index("AnonHugePages, cell max (MB)")].value == huge
        assert row[cols.index("process THP")].value == "0"  # mariadbd turned THP off for itself
    always = [r for r in t.rows if r[1].value == "always"]
    assert always and all(
        r[cols.index("AnonHugePages, cell max (MB)")].value == 40.0 for r in always
    )
    # the two `always` cells: THP was offered, mariadbd said no (under `never` nothing was offered)
    assert [c.split("__")[2] for c in hugepage_tables.thp_self_disabled(run)] == ["thp-always"] * 2


def test_failures_name_cells_and_levels(runs):
    fails = cell_tables.failures(load_run(runs["failed"]))
    assert {f["what"] for f in fails} == {"cell failed", "level point_select@64"}
    assert any("signal 11" in f["error"] for f in fails)


# -- the report -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["plain", "rep", "thp", "failed", "iibench", "standin"])
def test_report_is_self_contained_and_parses(runs, name):
    html_path, md_path = write_report(runs[name])
    assert html_path == runs[name] / "report.html" and md_path == runs[name] / "summary.md"
    page = parse(html_path.read_text())
    external = [
        u for u in page.urls if not (u.startswith("#") or u.startswith("data:image/png;base64,"))
    ]
    assert external == []
    run = load_run(runs[name])
    text = " ".join(page.text)
    for w in run.workloads:
        assert f"Workload: {w}" in text
    for a in run.allocators:
        assert a in text
    assert "coordinated omission" in text
    md = md_path.read_text()
    assert run.run_id in md and "| allocator |" in md


def test_report_tables_show_results_csv_numbers(runs):
    html_path, _ = write_report(runs["plain"])
    page = parse(html_path.read_text())
    rows = page.tables["throughput-point_select"]
    assert rows[0] == ["allocator", "8 thr", "16 thr", "32 thr", "64 thr"]
    run = load_run(runs["plain"])
    for row in rows[1:]:
        alloc = row[0]
        for th, cell in zip((8, 16, 32, 64), row[1:], strict=True):
            qps = next(
                r["qps"]
                for r in run.rows
                if r["allocator"] == alloc
                and r["threads"] == th
                and r["workload"] == "point_select"
            )
            assert cell.startswith(fmt(qps))
    assert len(page.urls) and sum(u.startswith("data:image/png") for u in page.urls) >= 5


def test_report_with_failures_lists_reasons_and_keeps_the_rest(runs):
    html_path, md_path = write_report(runs["failed"])
    page = parse(html_path.read_text())
    text = " ".join(page.text)
    assert "synthetic failure: server exited with signal 11" in text
    assert "1 of 3 cells did not finish" in text
    assert [r[0] for r in page.tables["throughput-oltp_ro"][1:]] == ["glibc", "jemalloc"]
    assert "signal 11" in md_path.read_text()


def test_thp_report_explains_self_disabled_thp(runs):
    html_path, md_path = write_report(runs["thp"])
    page = parse(html_path.read_text())
    text = " ".join(" ".join(page.text).split())
    assert "Transparent hugepages (THP)" in text
    assert "oltp_ro: hugepage impact — THP modes side by side" in text
    assert "The server disabled THP for itself" in text
    assert "THP was part of this study, but the server disabled THP" in text  # read this first
    assert "In 2 of 4 cell(s) THP was allowed" in text
    assert len(page.tables["thp-cells"]) == 1 + 4  # header + one row per cell
    md = md_path.read_text()
    assert "THP_enabled: 0" in md and "THP per cell" in md


def test_standin_is_labelled(runs):
    html_path, md_path = write_report(runs["standin"])
    text = " ".join(parse(html_path.read_text()).text)
    assert "protocol stand-in, no allocator conclusions" in text
    assert "protocol stand-in, no allocator conclusions" in md_path.read_text()


def test_report_of_a_run_without_results(tmp_path):
    path = make_run(tmp_path, "synthetic-empty", failed_cells=("glibc", "jemalloc", "tcmalloc"))
    html_path, _ = write_report(path)
    text = " ".join(parse(html_path.read_text()).text)
    assert "No level finished" in text
