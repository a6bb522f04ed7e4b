"""`make bench`'s printout: one row per figure, the ratio with its interval, the goal, and whether
it was met, NOT met, or not resolvable at the noise measured (which is printed beside it)."""

from __future__ import annotations

import math

from rich.table import Table

from bench import paired
from bench.bench import HIGH, LOW
from bench.reference import GOAL_IIBENCH


def _met(ok: bool | None, why: str = "") -> str:
    if ok is None:
        return "[yellow]n/a[/yellow]" + (f" ({why})" if why else "")
    return "[green]yes[/green]" if ok else "[red]NOT met[/red]" + (f" ({why})" if why else "")


def _fmt(x, spec=".1f") -> str:
    return "n/a" if x is None else format(x, spec)


def table(figures: dict) -> Table:
    m = figures["machine"]
    t = Table(
        title=f"mallocsweep bench — {m.get('cpu_model', '?')}, {m.get('cpu_count', '?')} cores, "
        f"kernel {m.get('kernel', '?')}"
    )
    for col in ("figure", "measured (side by side, this run)", "ratio", "goal", "met"):
        t.add_column(col)
    if "restore" in figures:
        r = figures["restore"]
        t.add_row(
            "dataset restore vs sysbench prepare",
            f"prepare {_fmt(r['prepare_s'], '.2f')} s, restore {_fmt(r['restore_s'], '.3f')} s "
            f"({r['method']}, {r['bytes'] / 1e6:.0f} MB)",
            f"{_fmt(r['ratio'])}x faster",
            ">= 20x",
            _met(r["ratio"] >= 20 if r["ratio"] is not None else None),
        )
    if "warm" in figures:
        w = figures["warm"]
        t.add_row(
            "server start to warm vs fixed 600 s warmup",
            f"{_fmt(w.get('start_to_warm_s'), '.1f')} s from server start to warm "
            f"(stopped by {w['stopped_by']}, {w['bp_reads_during']:.0f} reads from disk)",
            f"{_fmt(w.get('ratio'))}x shorter",
            "warm, < 600 s",
            _met(bool(w["warm"]) and w["start_to_warm_s"] < w["fixed_s"]),
        )
    if "onoff" in figures:
        onoff = figures["onoff"]
        high = onoff[str(HIGH)]
        frac = high["collectors_core_fraction"]
        short = min(high["connected_runs"], default=0)
        t.add_row(
            f"collectors CPU at {HIGH} connections",
            f"sampler + boundaries + window marks over the POINT_SELECT@{HIGH} level; "
            f"runs {[round(100 * x, 3) for x in high['collectors_core_fraction_runs']]} %; "
            f"Threads_connected {high['connected_runs']}",
            f"{_fmt(frac * 100 if frac is not None else None, '.3f')}% of a core",
            "<= 1% of a core",
            _met(
                frac <= 0.01 if frac is not None and short >= HIGH else False,
                "" if short >= HIGH else f"only {short} connections held",
            ),
        )
        for threads in (LOW, HIGH):
            o = onoff[str(threads)]
            t.add_row(
                f"POINT_SELECT@{threads} QPS, collectors on / off",
                f"on {[round(x) for x in o['on_runs']]}, off {[round(x) for x in o['off_runs']]}",
                f"{_fmt(o['ratio'], '.3f')} (noise {o['noise'] * 100:.1f}%)",
                "|1 - ratio| <= noise",
                _met(abs(1 - o["ratio"]) <= o["noise"] if o["ratio"] is not None else None),
            )
        src = onoff.get("source")
        if src is not None:
            ok = None
            if src["ratio"] is not None and src["as_planned"]:
                ok = src["ratio"] >= 1 - src["noise"]
            t.add_row(
                f"context-switch source cost: POINT_SELECT@{src['threads']} QPS, taskstats vs perf "
                "counters",
                f"taskstats {[round(x) for x in src['taskstats_runs']]}, "
                f"perf {[round(x) for x in src['perf_runs']]}"
                + ("" if src["as_planned"] else f"; sources used {src['sources_used']}"),
                f"{_fmt(src['ratio'], '.3f')}"
                + (f" (noise {src['noise'] * 100:.1f}%)" if src["noise"] is not None else ""),
                "taskstats >= perf - noise",
                _met(ok, "" if src["as_planned"] else "a life did not use the planned source"),
            )
    if "iibench" in figures:
        ii = figures["iibench"]
        sc = ii["scale"]
        t.add_row(
            "iibench client processes vs one process (rows/s)",
            f"{sc['processes_rows_per_s']:.0f} vs {sc['threads_rows_per_s']:.0f} "
            f"(noise {sc['noise'] * 100:.1f}%)",
            f"{_fmt(sc['ratio'], '.2f')}x",
            ">= 1 - noise",
            _met(sc["ratio"] >= 1 - sc["noise"] if sc["ratio"] is not None else None),
        )
        cpu = ii["cpu"]
        t.add_row(
            "iibench client CPU / server CPU",
            f"{cpu['client_cpu_s']:.2f} s vs {cpu['server_cpu_s']:.2f} s",
            f"{_fmt(cpu['fraction'], '.2f')}",
            "< 1 (client lighter than server)",
            _met(cpu["fraction"] < 1 if cpu["fraction"] is not None else None),
        )
    if "smaps" in figures:
        sm = figures["smaps"]
        rest = sm["at_rest"]
        t.add_row(
            "RSS taken apart: one smaps read (and the stack pointers) at a boundary",
            f"{rest['decompose']['wall_ms']:.1f} ms wall ({rest['decompose']['cpu_ms']:.1f} ms "
            f"CPU) at rest, {rest['mappings']} mappings, {rest['threads']} threads, "
            f"{rest['rss_kb'] / 1024:.0f} MB RSS; smaps_rollup {rest['smaps_rollup']['wall_ms']:.1f}"
            f" ms ({rest['smaps_rollup']['cpu_ms']:.1f} ms CPU), the 1 Hz sample "
            f"{rest['sample']['wall_ms']:.2f} ms; "
            f"{_fmt(sm.get('under_load_wall_ms'), '.1f')} ms under {sm['threads']} clients",
            f"{_fmt(rest['decompose']['cpu_ms'] / max(rest['smaps_rollup']['cpu_ms'], 1e-3))}x "
            "smaps_rollup's CPU",
            "phase boundaries only",
            _met(True, "read at boundaries, never in the 1 Hz loop"),
        )
        iv = sm["reads_over_none"]
        t.add_row(
            f"POINT_SELECT@{sm['threads']} QPS with a decomposition every {sm['every_s']:g} s / "
            "without (paired blocks, one life)",
            f"with {sm['qps']['reads']}, without {sm['qps']['none']}",
            _interval(iv) if iv.get("ratio") is not None else "n/a",
            "interval holds 1.0 (a bound: cells read at boundaries only)",
            _met(iv["lo"] <= 1 <= iv["hi"] if iv.get("lo") is not None else None),
        )
    for row in reference_rows(figures):
        t.add_row(*row)
    if "exposure" in figures:
        exposure_rows(t, figures["exposure"])
    return t


def verdicts_row(t: Table, v: dict) -> None:
    t.add_row(
        f"rounds to decide a true {v['effect'] - 1:.0%} difference (simulated at "
        f"{v['sigma'] * 100:.1f}% noise per server life, each point at 5% / "
        f"{v.get('points', 1)} points, "
        f"{v.get('noise_source', 'recorded in the test fixtures')})",
        f"budget (<= {v['max_rounds']} rounds): found {v['budget_found']:.0%} of {v['runs']} runs, "
        f"median {v['budget_median_rounds']:.0f} rounds; fixed 3 rounds: found "
        f"{v['fixed3_found']:.0%}",
        f"{_fmt(v['rounds_ratio'], '.1f')}x the rounds of the fixed design",
        "found in >= 80% of runs",
        _met(v["budget_found"] >= 0.8),
    )


def upgrade_rows(t: Table, u: dict) -> None:
    """Item 10: the in-run upgrade check against two separate runs, and the server A/A."""
    i, s, aa = u["inrun"], u["separate"], u["aa"]
    t.add_row(
        f"upgrade check {u['old']} -> host: NEW/BASE throughput interval, in one run vs two "
        f"separate runs ({u['rounds']} rounds each design, same lives)",
        f"median half-width: in one run +-{_fmt(i['median_half_width_pct'])}% over {i['points']} "
        f"points ({i['wall_s']:.0f} s, {i['significant']} significant); separate runs "
        f"+-{_fmt(s['median_half_width_pct'])}% over {s['points']} points ({s['wall_s']:.0f} s, "
        f"{s['significant']} significant); load average {_loads(i, s)}",
        f"{_fmt(u['ratio'], '.2f')}x the width",
        "in-run narrower (< 1x)",
        _met(u["ratio"] < 1 if u["ratio"] is not None else None),
    )
    t.add_row(
        "server A/A: one build under two names in one run",
        f"{aa['verdicts']} NEW/BASE verdicts, {aa['called_different']} called different "
        f"(interval half-width +-{_fmt(aa['median_half_width_pct'])}% median)",
        f"{aa['called_different']} of {aa['verdicts']}",
        "never called different",
        _met(aa["called_different"] == 0),
    )


def control_rows(t: Table, c: dict) -> None:
    """Item 11: the positive control's calibration and how the quick design judged it."""
    cal = c["calibration"]
    if "measured" in cal:
        m = cal["measured"]
        p = m["interval"]
        t.add_row(
            f"positive control calibration: glibc + {cal['trial_spins']} spins per malloc call "
            f"vs glibc at OLTP_RO@8, alternating blocks ({len(m['lives'])} lives)",
            f"ratio {_interval(p)}; spins for 5%: {cal['spins'].get('slow5')}, for 10%: "
            f"{cal['spins'].get('slow10')}; load average {_loads(m)}",
            f"{m['machine_min']:.1f} machine min",
            "a cost the blocks resolve",
            _met(p.get("hi") is not None and p["hi"] < 1),
        )
    else:
        t.add_row("positive control strengths", f"given: {cal['spins']}", "n/a", "", "")
    j = c.get("judge") or {}
    per = j.get("designs") or ({"": j} if "summary" in j else {})
    if not per:
        t.add_row("positive control: the quick design", j.get("skipped", "not run"), "n/a", "", "")
    for design, judged in per.items():
        _judge_rows(t, design, judged)


def _judge_rows(t: Table, design: str, j: dict) -> None:
    reps = j["repetitions"]
    loads = _loads(*reps)
    need = {"slow10": 0.8, "slow5": 0.6}
    label = f"quick design{f' as {design}' if design else ''}"
    for arm, s in sorted(j["summary"].items()):
        aa = arm.endswith("-aa")
        t.add_row(
            f"{label}, OLTP_RO@8: {arm} ({len(reps)} repetitions)",
            f"called slower {s['slower']} of {s['n']}, called anything {s['called']} of "
            f"{s['n']}; interval half-width +-{_fmt(s['median_half_width_pct'])}% median; "
            f"load average {loads}",
            f"{s['called'] if aa else s['slower']} of {s['n']}",
            "A/A never called" if aa else f"slower in >= {need.get(arm, 0):.0%}",
            _met(s["called"] == 0 if aa else s["slower"] >= need.get(arm, 1) * s["n"]),
        )


def design_rows(t: Table, d: dict) -> None:
    """Item 12: solo vs alternating blocks vs duet, the A/A pair and the control."""
    for key in sorted(k for k in d if "/" in k):
        f = d[key]
        design, pair = key.split("/")
        what = "A/A (glibc vs glibc)" if pair == "aa" else f"control ({d['spins']} spins)"
        t.add_row(
            f"design {design}, {what}, {d['workload'].upper()}@{d['threads']}, "
            f"{len(f['lives'])} lives",
            f"ratio {_interval(f['interval'])}, +-{_fmt(f['half_width_pct'])}% in "
            f"{_fmt(f['machine_min'])} machine min; load average {_loads(f)}",
            f"+-{_fmt(f['half_width_x_sqrt_min'])}% x sqrt(min)",
            "narrowest per machine minute wins",
            "",
        )


def _loads(*designs: dict) -> str:
    """The machine's 1-minute load averages over the designs (what else ran beside them)."""
    loads = [x for d in designs for x in d.get("load") or []]
    return f"{min(loads):.1f}-{max(loads):.1f}" if loads else "n/a"


def _interval(p: dict) -> str:
    if p.get("ratio") is None:
        return "n/a"
    if p.get("lo") is None:
        return f"{p['ratio']:.3f} [no interval]"
    return f"{p['ratio']:.3f} [{p['lo']:.3f}-{p['hi']:.3f}]"


def _verdict_cell(p: dict, goal: float = paired.GOAL) -> str:
    """met / NOT met / not resolvable, with the half-width the machine allowed."""
    v = p.get("verdict")
    if p.get("ratio") is None:
        return _met(None, "no complete pair")
    if v == "met":
        return "[green]yes[/green]"
    if v == "not met":
        return f"[red]NOT met[/red] (whole interval below {goal})"
    hw = p.get("half_width")
    return "[yellow]not resolvable[/yellow]" + (
        f" (+-{100 * hw:.1f}% at this noise; a verdict needs the interval clear of {goal}"
        f"{_pairs_needed(p, goal)})"
        if hw is not None
        else " (fewer than 2 pairs)"
    )


def _pairs_needed(p: dict, goal: float) -> str:
    """How many pairs would put the interval clear of the goal, if the ratio and the pair-to-pair
    sd stayed as measured: (z * sd / ln(ratio / goal))^2 — the measured reason the goal is open."""
    sd, ratio = p.get("sd"), p.get("ratio")
    if not sd or not ratio or ratio == goal:
        return ""
    n = math.ceil((1.96 * sd / math.log(ratio / goal)) ** 2)
    return f"; at this sd about {n} pairs would decide it" if n < 100_000 else ""


def sweep_rows(sweep: dict) -> list[tuple[str, str, str, str, str]]:
    """Item 8: per workload x threads, the paired ratio with its 95% interval, the noise that
    decided its width (one pair's sd), and the harness's own cost measured beside it."""
    rows = []
    for p in sweep.get("points", []):
        own = (
            f"runner {_fmt(100 * (p['runner_core_fraction'] or 0), '.2f')}% of a core; sysbench "
            f"CPU {_fmt(p['ours_client_us_per_query'], '.1f')} vs "
            f"{_fmt(p['raw_client_us_per_query'], '.1f')} us/query; server statements per "
            f"sysbench query {_fmt(p['ours_server_per_sysbench_query'], '.3f')} vs "
            f"{_fmt(p['raw_server_per_sysbench_query'], '.3f')}"
        )
        su = p.get("server_us_per_query") or {}
        civ = p.get("server_cpu_per_query_ratio") or {}
        if su.get("ours") is not None and su.get("raw") is not None:
            own += (
                f"; server CPU {su['ours']:.1f} vs {su['raw']:.1f} us/query, ratio {_interval(civ)}"
            )
        noise = (
            f"pair sd {100 * p['sd']:.1f}%, {p['pairs']} pairs of {sweep.get('block_s')} s"
            if p.get("sd") is not None
            else f"{p['pairs']} pair(s)"
        )
        if p.get("others_cores") is not None:
            noise += f", other load {p['others_cores']:.2f} cores"
        und = p.get("undisturbed") or {}
        if p.get("disturbed_blocks"):
            noise += (
                f"; {p['disturbed_blocks']} block(s) disturbed by other load (> "
                f"{paired.OTHER_LOAD_MAX_CORES} cores): without their pairs "
                f"{_interval(und)} over {und.get('pairs', 0)} pair(s)"
            )
        rows.append(
            (
                f"sweep vs raw sysbench, one life, paired: {p['workload'].upper()}@{p['threads']}"
                " QPS",
                f"ours {[round(x) for x in p['ours_qps']]}, raw {[round(x) for x in p['raw_qps']]}"
                f"; {noise}; {own}",
                _interval(p),
                f">= {paired.GOAL} (95% interval)",
                _verdict_cell(p),
            )
        )
    return rows


def source_rows(sweep: dict) -> list[tuple[str, str, str, str, str]]:
    """The sources figure: each of our sources against the arm without it, same life, cycles of
    adjacent blocks (bench.paired.SOURCE_ARMS)."""
    src = sweep.get("sources")
    if not src:
        return []
    where = f"{src['workload'].upper()}@{src['threads']}"
    qps = "; ".join(f"{a} {[round(x) for x in q]}" for a, q in src["qps_by_arm"].items())
    rows = []
    for st in src["steps"]:
        noise = f"cycle sd {100 * st['sd']:.1f}%" if st.get("sd") is not None else ""
        rows.append(
            (
                f"what one source costs at {where}: {st['arm']} / {st['versus']} QPS",
                f"{st['source']}; {st['cycles']} cycles, {noise}"
                + (f"; QPS {qps}" if st is src["steps"][0] else ""),
                _interval(st),
                f">= {paired.GOAL} (95% interval)",
                _verdict_cell(st),
            )
        )
    return rows


def reference_rows(figures: dict) -> list[tuple[str, str, str, str, str]]:
    """Rows of items 8 and 9: each ratio with its interval, and when a goal is not met the
    measured reason (the harness's own cost beside the machine's round-to-round spread)."""
    rows = sweep_rows(figures.get("sweep_vs_raw") or {})
    rows += source_rows(figures.get("sweep_vs_raw") or {})
    ii = figures.get("iibench_vs_reference") or {}
    if "skipped" in ii:
        rows.append(("iibench vs iibench.py", ii["skipped"], "n/a", ">= 1.0", _met(None)))
    for p in ii.get("points", []):
        cpu = (
            f"client CPU {_fmt(p['ours_cpu_us_per_row'], '.2f')} vs "
            f"{_fmt(p['ref_cpu_us_per_row'], '.2f')} us/row"
        )
        rows.append(
            (
                f"iibench vs iibench.py, {p['clients']} client(s), {p['rows']} rows: rows/s",
                f"ours {[round(x) for x in p['ours_rows_per_s']]}, iibench.py "
                f"{[round(x) for x in p['ref_rows_per_s']]} (launch to exit); {cpu}",
                _interval(p),
                f">= {GOAL_IIBENCH} (95% interval)",
                _verdict_cell(p, GOAL_IIBENCH),
            )
        )
        rows.append(
            (
                f"iibench client CPU per row, {p['clients']} client(s)",
                cpu + " (whole client processes' rusage)",
                _fmt(
                    p["ours_cpu_us_per_row"] / p["ref_cpu_us_per_row"]
                    if p["ours_cpu_us_per_row"] and p["ref_cpu_us_per_row"]
                    else None,
                    ".2f",
                ),
                "< 1 (ours lighter)",
                _met(p["cpu_met"]),
            )
        )
    return rows


def exposure_rows(t: Table, e: dict) -> None:
    """Counting the allocator's calls: its cost, and the installed allocators' per-call cost."""
    p = e.get("paired") or {}
    d = e.get("derived") or {}
    ok = {"met": True, "not met": False}.get(p.get("verdict") or "")
    t.add_row(
        "counting allocator calls: QPS counted / not (OLTP_RO@8, alternated lives)",
        f"{p.get('pairs', 0)} pairs; derived: {_fmt(d.get('counter_ns_per_call'), '.2f')} ns per "
        f"call x {_fmt(d.get('calls_and_frees_per_query'), '.2f')} calls per query over "
        f"{_fmt(d.get('cpu_us_per_query'), '.1f')} us of CPU = "
        f"{_fmt((d.get('cost_fraction') or 0) * 100, '.3f')}% (load {e.get('load_avg_start')})",
        f"{_fmt(p.get('ratio'), '.3f')} [{_fmt(p.get('lo'), '.3f')}-{_fmt(p.get('hi'), '.3f')}]",
        ">= 0.99",
        _met(ok, "interval straddles the goal" if ok is None else ""),
    )
    cost = e.get("call_cost") or {}
    for cls in ("small", "large"):
        per = ", ".join(
            f"{row['allocator']} "
            + "/".join(f"{v:.2f}" for _, v in sorted((row["ns_per_call"].get(cls) or {}).items()))
            for row in cost.get("table") or ()
        )
        b = (cost.get("bound") or {}).get(cls) or {}
        t.add_row(
            f"per-call cost of the installed allocators, {cls} blocks (ns, "
            f"{'/'.join(str(x) for x in cost.get('threads') or ())} threads)",
            per,
            f"largest difference {_fmt(b.get('ns'), '.2f')} ns ({b.get('dearest')} vs "
            f"{b.get('cheapest')})",
            "measured",
            _met(bool(per)),
        )
