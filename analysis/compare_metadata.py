"""What differs between two runs besides what `compare` is asked about: the host, the suite's
settings and dataset, what each THP mode meant, where context switches came from, the server's
build and platform, allocator versions, unfinished runs and stand-ins. Each becomes a loud warning
(pyperf's checked metadata): any of them can explain a difference the verdicts would otherwise
pin on the change.
"""

from __future__ import annotations

from collections import defaultdict

from analysis import point_tables, run_design
from rundir.read import Run

HOST_KEYS = ("hostname", "kernel", "cpu_model", "cores", "memory_kb", "glibc")
# Suite settings that do not change what was measured: where the run went, how often it repeated
# (the evidence rules handle that), and its name.
SUITE_KEYS_IGNORED = frozenset({"run.out", "run.repeat", "suite.name", "suite.description"})
# How arms were compared: said in one line of its own (analysis/run_design.py), not key by key.
SUITE_KEYS_DESIGN = frozenset({"run.design", "run.block_s", "run.blocks", "run.block_settle_cap_s"})
# In an upgrade check the server binary is what is being compared.
# Where the server came from is what an upgrade check changes: not a difference worth a warning.
SUITE_KEYS_UPGRADE = frozenset({"server.binary", "server.basedir", "server.root", "server.fetched"})


def flatten(d: dict, prefix: str = "") -> dict[str, object]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists and scalars are leaves."""
    out: dict[str, object] = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, name + "."))
        else:
            out[name] = v
    return out


def _suite_differences(base: Run, new: Run, mode: str) -> list[str]:
    """Every suite setting that differs (the whole manifest["suite"], not a chosen few)."""
    ignored = (
        SUITE_KEYS_IGNORED
        | SUITE_KEYS_DESIGN
        | (SUITE_KEYS_UPGRADE if mode == "upgrade" else frozenset())
    )
    b, n = flatten(base.suite), flatten(new.suite)
    out = []
    for k in sorted(set(b) | set(n)):
        if k in ignored or b.get(k) == n.get(k):
            continue
        bv = b.get(k, "(not set)")
        nv = n.get(k, "(not set)")
        what = "dataset differs" if k.startswith("dataset.") else "suite setting differs"
        out.append(f"{what}: {k} = {bv!r} (base) vs {nv!r} (new)")
    return out


def differences(base: Run, new: Run, mode: str, pairs: list[tuple[str, str]]) -> list[str]:
    """Loud warnings: anything besides the server version that differs makes a verdict doubtful."""
    out = []
    for k in HOST_KEYS:
        b, n = base.host.get(k), new.host.get(k)
        if b != n:
            out.append(
                f"host {k} differs: {b!r} (base) vs {n!r} (new) — the runs are not from the same machine setup"
            )
    bt, nt = base.host.get("thp") or {}, new.host.get("thp") or {}
    for k in ("enabled", "defrag"):
        if bt.get(k) != nt.get(k):
            out.append(f"system THP {k} differs: {bt.get(k)!r} vs {nt.get(k)!r}")
    if base.kind != new.kind:
        out.append(f"suite kind differs: {base.kind} vs {new.kind}")
    out += _suite_differences(base, new, mode)
    bd, nd = run_design.words(base.manifest), run_design.words(new.manifest)
    if bd != nd:
        out.append(
            f"design differs: {bd} (base) vs {nd} (new) — the two runs' throughput figures were "
            "measured differently (docs/designs.md)"
        )
    bf, nf = _thp_in_force(base), _thp_in_force(new)
    for mode_name in sorted(set(bf) & set(nf)):
        if bf[mode_name] != nf[mode_name]:
            out.append(
                f"THP mode {mode_name!r} meant different settings: {sorted(bf[mode_name])} vs {sorted(nf[mode_name])}"
            )
    bs, ns = _ctxsw_sources(base), _ctxsw_sources(new)
    if bs and ns and bs != ns:
        out.append(
            f"context-switch source differs: {', '.join(sorted(bs))} (base) vs "
            f"{', '.join(sorted(ns))} (new) — perf counters follow every server thread and cost "
            "it throughput (make bench measures how much), taskstats does not: part of a QPS "
            "difference may be the measurement's"
        )
    bp, np_ = _server_platform(base), _server_platform(new)
    for k in bp:
        if bp[k] != np_[k]:
            out.append(f"server {k} differs: {bp[k]} (base) vs {np_[k]} (new)")
    bv, nv = _alloc_versions(base), _alloc_versions(new)
    for name in sorted(set(bv) & set(nv)):
        if bv[name] != nv[name]:
            out.append(f"allocator {name} version differs: {bv[name]} vs {nv[name]}")
    for run, side in ((base, "base"), (new, "new")):
        if run.status != "finished":
            m = run.manifest
            by = f" by {m['interrupted_by']}" if m.get("interrupted_by") else ""
            finish = (
                f" (finish it with `mallocsweep run {m.get('suite_file') or 'SUITE.toml'} "
                f"--resume {run.path}`)"
                if run.status == "interrupted"
                else ""
            )
            out.append(
                f"{side} run {run.run_id} is {run.status}{by}: only its finished cells are "
                f"compared{finish}"
            )
        if run.has_standin:
            out.append(f"{side} run uses a MongoDB protocol stand-in: {point_tables.STANDIN_LABEL}")
    if mode == "upgrade":
        ((old, now),) = pairs
        # Labels are FLAVOR-VERSION (NAME:FLAVOR-VERSION in a run of several servers): two
        # flavors make it a choice between servers, not an upgrade.
        what = "upgrade check" if _flavor(old) == _flavor(now) else "which-server check"
        out.append(
            f"{what}: {old} -> {now}; points matched by allocator. Two runs made at different "
            "times carry whatever drifted between them (load, page cache, a neighbour); both "
            "servers in one run, interleaved and paired by round, is the stronger design: "
            f"`mallocsweep run SUITE --servers old=...,new=...`"
        )
    return out


def _flavor(label: str) -> str:
    return label.rpartition(":")[2].split("-")[0]


def _server_platform(run: Run) -> dict[str, str]:
    """What the server ran on besides its own version: its build, the Debian release and glibc
    under it (a server root's own, or the host's), so an upgrade check says what else changed."""
    builds, releases, glibcs = set(), set(), set()
    for c in run.cells.values():
        srv = c.get("server") or {}
        root = srv.get("root") or {}
        if srv.get("version_string"):
            builds.add(str(srv["version_string"]))
        releases.add(str(root.get("release") or "the host's"))
        glibcs.add(str(root.get("glibc") or run.host.get("glibc") or "?"))
    return {
        "build": ", ".join(sorted(builds)) or "?",
        "release": ", ".join(sorted(releases)),
        "glibc": ", ".join(sorted(glibcs)),
    }


def _thp_in_force(run: Run) -> dict[str, set]:
    out: dict[str, set] = defaultdict(set)
    for c in run.cells.values():
        thp = c.get("thp") or {}
        f = thp.get("in_force") or {}
        if thp.get("requested") and f:
            out[thp["requested"]].add(f"enabled={f.get('enabled')}, defrag={f.get('defrag')}")
    return out


def _ctxsw_sources(run: Run) -> set[str]:
    """The context-switch sources the run's cells used (empty for runs that do not say)."""
    out = set()
    for c in run.cells.values():
        src = c.get("ctxsw_source") or (c.get("collectors") or {}).get("ctxsw_source")
        if src:
            out.add(str(src))
    return out


def _alloc_versions(run: Run) -> dict[str, str]:
    return {
        str(c["allocator"]["name"]): str(c["allocator"].get("version"))
        for c in run.cells.values()
        if (c.get("allocator") or {}).get("name")
    }


def _lives(run: Run) -> dict[tuple, str]:
    """The server lives a run holds, each identified by what no other life shares: its start and
    end, the server's pid and its exit's resource usage (a life without a pid or a reading, as in
    synthetic runs, cannot be told apart and is left out). -> cell id."""
    out = {}
    for cid, c in run.cells.items():
        ver, ex = c.get("verification"), c.get("exit")
        pid = ver.get("pid") if isinstance(ver, dict) else None
        usage = ex.get("rusage") if isinstance(ex, dict) else None
        if not c.get("started_at") or pid is None or not usage:
            continue
        key = (c.get("started_at"), c.get("finished_at"), pid, repr(sorted(usage.items())))
        out[key] = cid
    return out


def same_run(base: Run, new: Run) -> str | None:
    """Why BASE and NEW are one run (the same directory, a copy, or a run that holds the other's
    cells, like a merge and its shard), or None. A verdict between them would compare a run with
    itself and could only say "no change"."""
    b, n = base.path.resolve(), new.path.resolve()
    if b == n:
        return f"BASE and NEW are the same run directory ({b})"
    bm, nm = base.manifest, new.manifest
    ident = ("run_id", "started_at")
    host = ("hostname", "boot_id")
    if (
        bm.get("run_id")
        and all(bm.get(k) == nm.get(k) for k in ident)
        and all(base.host.get(k) == new.host.get(k) for k in host)
    ):
        return (
            f"BASE and NEW are the same run ({bm.get('run_id')}, started {bm.get('started_at')} on "
            f"{base.host.get('hostname') or 'the same host'}): {new.path} is a copy of "
            f"{base.path} or the other way round"
        )
    shared = sorted(set(_lives(base)) & set(_lives(new)))
    if shared:
        cid = _lives(new)[shared[0]]
        return (
            f"BASE and NEW hold the same server life (cell {cid}, started {shared[0][0]}, pid "
            f"{shared[0][2]}) and {len(shared) - 1} more: one run is a copy of the other or holds "
            "its cells"
        )
    if base.rows and len(base.rows) == len(new.rows):
        keys = [c for c in base.columns if c in new.columns and c != "cell"]
        if [[r.get(k) for k in keys] for r in base.rows] == [
            [r.get(k) for k in keys] for r in new.rows
        ]:
            return (
                f"BASE and NEW have identical results, row for row ({len(base.rows)} rows): "
                f"{new.path} is a copy of {base.path} or the other way round"
            )
    return None
