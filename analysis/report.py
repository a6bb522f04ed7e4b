"""`report.html` and `summary.md` for one run directory.

report.html is one self-contained file (figures embedded as PNG data URIs, CSS inline, no script)
that opens offline and explains each section to a reader who never saw the README. summary.md has
the same key tables in Markdown, for tickets and pull requests. Both are rewritten from the run's
files each time: they are views, never the record.
"""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from analysis import (
    alloc_memory,
    cell_tables,
    churn,
    exposure,
    fragmentation,
    fragmentation_plots,
    hugepage_report,
    hugepage_tables,
    memory,
    memory_plots,
    notices,
    plots,
    point_tables,
    run_design,
    rww_tables,
    server_log,
    upgrade,
    verdict_tables,
    verdicts,
)
from analysis.clients import client_table
from analysis.errors import AnalysisError
from analysis.table_model import Table, fmt
from analysis.workload_words import words
from rundir.atomic import atomic_replace_all, atomic_write
from rundir.format import VERDICTS
from rundir.read import Run, load_run

# The templates ship in this package (analysis/templates), read through importlib.resources.
TEMPLATES = PackageLoader("analysis", "templates")
REPORT_HTML = "report.html"
SUMMARY_MD = "summary.md"

CLOSED_LOOP_NOTE = (
    "Latency here comes from a closed-loop load: each client thread sends its next request only"
    " after the previous one returned. When the server stalls, clients stop sending, so the stall"
    " delays far fewer requests than it would delay real, independently arriving users"
    " (coordinated omission). p95/p99 figures therefore understate tail latency, most at high"
    " thread counts; use them to rank allocators, not as a service-level promise. A fixed-rate"
    " run (sysbench --rate) measures tails honestly."
)


def _env() -> Environment:
    env = Environment(
        loader=TEMPLATES,
        autoescape=lambda name: bool(name) and name.endswith(".html.j2"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["ticks"] = ticks
    return env


def ticks(value: str) -> Markup:
    """Escaped text with `command` spans shown as <code>: manifest texts (errors, warnings) quote
    commands the Markdown way; the HTML report shows them as code, never as raw backticks."""
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(value))))


def at_a_glance(run: Run, baseline: str | None = None) -> Table:
    """Only significant differences from the baseline, the rest grouped (analysis/verdicts.py)."""
    base = verdicts.baseline_of(run, baseline)
    return verdict_tables.glance_table(run, verdicts.run_verdicts(run, base), base)


def warnings(run: Run, baseline: str | None = None) -> list[str]:
    out = []
    if run.status not in ("finished", "failed", "interrupted"):  # those two: notices.run_problems
        out.append(f"The run is {run.status}: figures cover only the cells that finished.")
    soak = run.manifest.get("soak") or {}
    if run.status == "running" and soak:
        # a soak's cells end only when its hours do: until then its cycles are in the journal
        out.append(
            f"A soak is running ({float(soak.get('done_s') or 0) / 3600:.2f} of "
            f"{float(soak.get('seconds') or 0) / 3600:.2f} h at its last checkpoint): its cycles"
            " are journalled under checkpoints/ and come into this report when the arms' lives"
            " end; meanwhile the runner's live line shows each arm's growth per hour."
        )
    elif not run.rows:
        out.append("No level finished: there are no measurements to show yet.")
    bad = [c for c, v in run.cells.items() if v.get("status") not in ("ok", "pending", "running")]
    if bad:
        out.append(
            f"{len(bad)} of {len(run.cells)} cells did not finish; see 'Failures'. The other"
            " cells are reported normally."
        )
    waiting = [c for c, v in run.cells.items() if v.get("status") in ("pending", "running")]
    if waiting:
        out.append(
            f"{len(waiting)} of {len(run.cells)} cells have not run yet (pending or running)."
        )
    if run.has_standin:
        out.append(
            f"This run used a MongoDB wire-protocol stand-in: {point_tables.STANDIN_LABEL}. Its"
            " figures show the harness works, not how any allocator performs."
        )
    if run.rows and run.repeats < 2:
        out.append(
            "Each point was measured once (no --repeat): figures carry no confidence"
            " interval, and differences of a few percent may be noise."
        )
    experiments = sorted({v["experiment"] for v in run.cells.values() if v.get("experiment")})
    for what in experiments:
        out.append(
            f"EXPERIMENT — {what}. Figures from these cells describe a modified server, not the"
            " server as shipped; compare them only with each other."
        )
    self_off = hugepage_tables.thp_self_disabled(run)
    if self_off and (len(run.thp_modes) > 1 or run.thp_modes != ["system"]):
        out.append(
            f"THP was part of this study, but the server disabled THP for itself in"
            f" {len(self_off)} cell(s): the THP mode reached at most its buffer pool, not the"
            " allocator's heap. See 'Transparent hugepages'."
        )
    not_taken = [
        c
        for c in hugepage_tables.thp_state_mismatches(run)
        if hugepage_tables.cell_process_thp(run, c)
    ]
    if not_taken:
        out.append(
            f"THP 'never' by prctl did not take in {len(not_taken)} cell(s): those servers ran"
            " with THP allowed (process THP 1). See 'Transparent hugepages'."
        )
    out += notices.server_warnings(run)
    out += server_log.setting_warnings(run)
    why = verdicts.why_no_verdicts(run, baseline)
    if why and run.rows:
        out.append(f"No verdicts: {why}. The figures below are single measurements, not a ranking.")
    alarm = verdicts.aa_alarm(verdicts.run_verdicts(run, verdicts.baseline_of(run, baseline)))
    if alarm:
        out.insert(0, verdict_tables.aa_alarm_text(alarm))
    server_alarm = upgrade.aa_alarm(run, upgrade.upgrade_verdicts(run, baseline))
    if server_alarm:
        out.insert(0, upgrade.aa_alarm_text(server_alarm))
    rec = cell_tables.reconciliation_failed(run)
    if rec:
        out.append(
            f"Context switches did not reconcile with the kernel's totals in {len(rec)}"
            " cell(s); per-level context-switch figures there are doubtful."
        )
    return out


def build_context(run: Run, baseline: str | None = None) -> dict:
    base = verdicts.baseline_of(run, baseline)
    judged = verdicts.run_verdicts(run, base)
    workloads = []
    for wl in run.workloads:
        metric = point_tables.metric_of(run, wl)
        is_ii = words(wl).one_long_level  # no thread sweep: rates over the level instead
        one_level = is_ii or words(wl).scenario  # a scenario's cycles run at one client count
        workloads.append(
            {
                "name": wl,
                "description": words(wl).description,
                "metric": metric,
                "metric_label": point_tables.metric_label(wl, metric),
                "throughput_plot": None if one_level else plots.throughput_plot(run, wl, metric),
                "latency_plot": None if one_level else plots.latency_plot(run, wl),
                "interval_plot": plots.interval_rate_plot(run, wl) if is_ii else None,
                "verdict_table": verdict_tables.workload_verdict_table(run, judged, wl),
                "throughput_table": point_tables.throughput_table(run, wl, metric),
                "latency_tables": [point_tables.latency_table(run, wl, p) for p in ("p95", "p99")],
                "efficiency_tables": point_tables.efficiency_tables(run, wl),
                # calls into the allocator per query, and whether it can matter (issue 33)
                "exposure_table": exposure.exposure_table(run, wl),
                "hugepage_table": hugepage_tables.hugepage_table(run, wl),
            }
        )
    return {
        "run": run,
        "title": f"mallocsweep report — {run.run_id}",
        "metadata": cell_tables.metadata(run),
        "servers": cell_tables.servers_table(run),
        "allocators": cell_tables.allocators_table(run),
        "problems": notices.run_problems(run),
        "warnings": warnings(run, base),
        "glance": verdict_tables.glance_table(run, judged, base),
        # several servers in one run (an upgrade check): NEW/BASE and the interaction
        "upgrade": upgrade.context(run, judged, base),
        "noise": verdict_tables.noise_table(run, judged, base),
        "proof_summary": cell_tables.proof_summary_table(run),
        "proof": cell_tables.proof_table(run),
        "binding": cell_tables.binding_table(run),
        "workloads": workloads,
        "iibench": (
            point_tables.iibench_table(run)
            if any(words(wl).insert_table for wl in run.workloads)
            else None
        ),
        # read-while-writing: the Symas 2015 layout per engine, and its RSS comparison
        "rww_tables": rww_tables.symas_tables(run)
        + [t for t in [rww_tables.rss_ratio_table(run)] if t is not None],
        "memory": memory.memory_table(run),
        "clients": client_table(run),
        "rss_plot": plots.rss_timeline_plot(run),
        "alloc_memory": alloc_memory.alloc_table(run),
        "resident_plot": memory_plots.resident_parts_plot(run),
        "fragmentation": fragmentation_context(run, judged, base),
        "churn": churn.churn_table(run),
        "churn_plot": memory_plots.churn_rss_plot(run),
        "thp_modes": run.thp_modes,
        # the three hugepage questions in words, then verdicts, where the pages were, the cost
        "hugepage_study": hugepage_report.hugepage_section(run),
        "thp_cells": hugepage_tables.thp_cells_table(run),
        "thp_advice": notices.thp_advice(run),
        "thp_self_disabled": hugepage_tables.thp_self_disabled(run),
        "thp_kept": hugepage_tables.thp_kept(run),
        "thp_mismatches": hugepage_tables.thp_state_mismatches(run),
        "thp_probe": run.manifest.get("thp_prctl_probe") or {},
        "probe_why": probe_why(run.manifest.get("thp_prctl_probe")),
        "failures": cell_tables.failures(run),
        "reconciliation": cell_tables.reconciliation_table(run),
        "closed_loop_note": CLOSED_LOOP_NOTE,
        "repeats": run.repeats,
        "standin_label": point_tables.STANDIN_LABEL,
    }


def fragmentation_context(run: Run, judged, base: str) -> dict | None:
    """The fragmentation section (templates/_fragmentation.html.j2), None for a run without
    scenario cycles."""
    if not fragmentation.scenario_workloads(run):
        return None
    return {
        "growth": fragmentation.growth_table(run, judged, base),
        "release": fragmentation.release_table(run, judged, base),
        "claims": fragmentation.claims_table(run, judged, base),
        "parts_plots": fragmentation_plots.parts_by_cycle_plots(run),
        "cost_plot": fragmentation_plots.cost_plot(run),
        "baseline": base,
    }


def probe_why(probe: dict | None) -> str:
    """Why the prctl-vs-MADV_HUGEPAGE probe has no answer, in words."""
    if not probe:
        return "the run predates the probe"
    if probe.get("force_error"):
        return probe["force_error"]
    if (probe.get("probe_mode") or probe.get("system_enabled")) == "never":
        return "THP was never system-wide and could not be switched on for the probe (needs root)"
    if probe.get("advised_kb") is None:
        return "the probe process failed"
    return "the probe got no huge pages even without the prctl (memory too fragmented?)"


def verdicts_text(run: Run, baseline: str | None = None) -> str:
    """RUN_DIR/verdicts.csv's text, for scripts and CI (derived: rewritten on every report)."""
    base = verdicts.baseline_of(run, baseline)
    judged = verdicts.run_verdicts(run, base) + upgrade.upgrade_verdicts(run, base)
    return verdicts.verdicts_csv(judged, run_design.name(run.manifest))


def write_verdicts(run: Run, baseline: str | None = None) -> Path:
    path = run.path / VERDICTS
    atomic_write(path, verdicts_text(run, baseline))
    return path


def render(run: Run, baseline: str | None = None) -> tuple[str, str]:
    """(report HTML, summary Markdown) of a loaded run."""
    env = _env()
    ctx = build_context(run, baseline)
    return env.get_template("report.html.j2").render(ctx), env.get_template("summary.md.j2").render(
        ctx
    )


def write_report(
    run_dir: Path, baseline: str | None = None, run: Run | None = None
) -> tuple[Path, Path]:
    """Write RUN_DIR/report.html, RUN_DIR/summary.md and RUN_DIR/verdicts.csv; returns the first
    two paths. `run`: the run as the caller already read it (e.g. with --allow-incomplete)."""
    run = run if run is not None else load_run(Path(run_dir))
    html, md = render(run, baseline)
    html_path, md_path = run.path / REPORT_HTML, run.path / SUMMARY_MD
    outputs = [
        (run.path / VERDICTS, verdicts_text(run, baseline)),
        (html_path, html),
        (md_path, md),
    ]
    try:
        # all three or none: a report.html rewritten beside an old summary.md would disagree
        atomic_replace_all(outputs)
    except OSError as e:
        where = e.filename or run.path
        raise AnalysisError(
            f"{where}: cannot write: {e.strerror or e}; nothing was rewritten (report.html, "
            "summary.md and verdicts.csv are as they were)"
        ) from None
    return html_path, md_path
