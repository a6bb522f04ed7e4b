"""Per-cell tables: the allocator proof, failures with their reasons, the collectors'
reconciliation, and the run's metadata (host, servers, allocators)."""

from __future__ import annotations

from analysis.rundir import Run
from analysis.table import Cell, Table, fmt, num, text
from analysis.tables import STANDIN_LABEL


# -- cells: proof, failures, reconciliation ------------------------------------------------------
def _mapped_text(v, library: str | None) -> str:
    if not library and not v:
        return "n/a (no preload)"
    if isinstance(v, list):
        return ", ".join(str(x) for x in v) if v else "not mapped"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "" if v is None else str(v)


def _first(d: dict, *keys):
    """The first present key: the verification record's spelling may vary between versions."""
    return next((d[k] for k in keys if d.get(k) is not None), None)


def _defines_malloc(ver: dict) -> str:
    defs = ver.get("binary_malloc_definitions")
    if defs is None:
        return ""
    return ("yes: " + ", ".join(defs)) if defs else "no"


def proof_table(run: Run) -> Table:
    table = Table(
        "proof",
        "Allocator proof per cell",
        "A cell is one server life under one allocator. Before measuring, mallocsweep checks that the"
        " allocator really serves malloc: its library is mapped into the server process"
        " (/proc/PID/maps) and the server binary does not define malloc itself. The server's own"
        " report (MariaDB @@version_malloc_library) is a cross-check only: it says 'system' for"
        " mimalloc and TBB even when they are loaded. 'verdict' is the conclusion: verified means"
        " the measured allocator is the one named.",
        [
            "cell",
            "status",
            "server",
            "allocator",
            "library",
            "mapped",
            "binary defines malloc",
            "server reports",
            "agreement",
            "verdict",
        ],
    )
    for cid, c in run.cells.items():
        server = c.get("server") or {}
        alloc = c.get("allocator") or {}
        ver = c.get("verification") or {}
        srv = " ".join(str(x) for x in (server.get("flavor"), server.get("version")) if x)
        if server.get("standin"):
            srv += f" ({STANDIN_LABEL})"
        name = str(alloc.get("name") or "")
        if alloc.get("version"):
            name += f" {alloc['version']}"
        table.rows.append(
            [
                text(cid),
                text(c.get("status")),
                text(srv or server.get("label")),
                text(name),
                text(alloc.get("library") or ("built in / no preload" if name else "")),
                text(_mapped_text(_first(ver, "mapped", "library_mapped"), alloc.get("library"))),
                text(_defines_malloc(ver)),
                text(ver.get("server_reported")),
                text(_first(ver, "agreement", "server_agreement")),
                text(ver.get("verdict")),
            ]
        )
    return table


def failures(run: Run) -> list[dict]:
    """Cells that did not finish and levels that failed, with their reasons."""
    out = []
    for cid, c in run.cells.items():
        if c.get("status") not in ("ok", "pending", "running"):
            out.append(
                {
                    "cell": cid,
                    "what": f"cell {c.get('status') or 'unknown'}",
                    "error": c.get("error") or "(no reason recorded)",
                }
            )
    for r in run.rows:
        if (r.get("status") or "ok") != "ok":
            out.append(
                {
                    "cell": r["cell"],
                    "what": f"level {r['workload']}@{r['threads']}",
                    "error": r.get("error") or "(no reason recorded)",
                }
            )
    return out


def reconciliation_table(run: Run) -> Table:
    table = Table(
        "reconciliation",
        "Collectors: do the per-level figures add up?",
        "Context switches per level come from whole-process counters (taskstats, or perf counters"
        " that follow every server thread). At exit, the kernel's exact whole-life totals (wait4"
        " rusage) are compared with what the collectors counted (the per-level figures add up to"
        " it): 'passed' means they agree within tolerance, so per-level figures can be trusted. The sampler's own CPU cost is shown so you can judge the measurement overhead.",
        ["cell", "check", "difference", "context-switch source", "sampler CPU (s)"],
    )
    for cid, c in run.cells.items():
        coll = c.get("collectors") or {}
        rec = coll.get("reconciliation") or {}
        diff = rec.get("diff_pct")
        table.rows.append(
            [
                text(cid),
                text(
                    rec.get("check")
                    or ("error: " + coll["error"] if coll.get("error") else "not recorded")
                ),
                Cell(diff, "–" if diff is None else f"{diff:.2f}%"),
                text(coll.get("ctxsw_source")),
                num(coll.get("sampler_cpu_s")),
            ]
        )
    return table


def reconciliation_failed(run: Run) -> list[str]:
    return [
        cid
        for cid, c in run.cells.items()
        if ((c.get("collectors") or {}).get("reconciliation") or {}).get("check") == "failed"
    ]


# -- metadata ------------------------------------------------------------------------------------
def metadata(run: Run) -> list[tuple[str, str]]:
    h = run.host
    thp = h.get("thp") or {}
    info = run.suite.get("suite") if isinstance(run.suite.get("suite"), dict) else run.suite
    ds = run.dataset
    rows = [
        ("run", run.run_id),
        ("status", run.status),
        (
            "started / finished",
            f"{run.manifest.get('started_at') or '?'} / {run.manifest.get('finished_at') or 'not finished'}",
        ),
        (
            "suite",
            f"{info.get('name', '?')} ({run.kind}) — {info.get('description', '')}".rstrip(" —"),
        ),
        (
            "suite file",
            f"{run.manifest.get('suite_file', '?')} (sha256 {str(run.manifest.get('suite_sha256', ''))[:12]})",
        ),
        # An iibench load builds its own table: its settings are the dataset that matters.
        (
            ("load", ", ".join(f"{k}={v}" for k, v in (run.suite.get("iibench") or {}).items()))
            if run.kind == "iibench"
            else ("dataset", ", ".join(f"{k}={v}" for k, v in ds.items()) or "–")
        ),
        (
            "host",
            f"{h.get('hostname', '?')}: {h.get('cpu_model', '?')}, {h.get('cores', '?')} cores, "
            f"{fmt(h['memory_kb'] / 1048576 if h.get('memory_kb') else None)} GB",
        ),
        (
            "kernel / glibc / python",
            f"{h.get('kernel', '?')} / {h.get('glibc', '?')} / {h.get('python', '?')}",
        ),
        (
            "THP (system, at run start)",
            f"enabled={thp.get('enabled', '?')}, defrag={thp.get('defrag', '?')}"
            + (
                "; each cell's mode: see Transparent hugepages"
                if run.thp_modes != ["system"]
                else ""
            ),
        ),
        *_root_rows(run),
        ("CPU governor", str(h.get("governor") or "unknown")),
        ("repeats", str(run.repeats)),
        (
            "tool",
            f"{(run.manifest.get('tool') or {}).get('name', 'mallocsweep')} "
            f"{(run.manifest.get('tool') or {}).get('version', '?')}",
        ),
    ]
    return rows


def _root_rows(run: Run) -> list[tuple[str, str]]:
    """The server roots the run's servers ran in: their release and glibc, which replace the
    host's for the server (the host's glibc above is then not the one serving the server)."""
    rows, seen = [], set()
    for c in run.cells.values():
        r = (c.get("server") or {}).get("root") or {}
        if r.get("path") and r["path"] not in seen:
            seen.add(r["path"])
            rows.append(
                (
                    "server root",
                    f"{r['path']}: {r.get('release') or '?'}, glibc {r.get('glibc') or '?'}"
                    " (the server runs on the root's libraries and allocators, not the host's)",
                )
            )
    return rows


def servers_table(run: Run) -> Table:
    table = Table(
        "servers",
        "Servers",
        "Each server binary the run started, as it identified itself.",
        ["server", "flavor", "version", "binary", "note"],
    )
    seen = set()
    for c in run.cells.values():
        s = c.get("server") or {}
        key = (s.get("flavor"), s.get("version"), s.get("binary"))
        if not s.get("flavor") or key in seen:
            continue
        seen.add(key)
        table.rows.append(
            [
                text(s.get("label") or f"{s.get('flavor')}-{s.get('version')}"),
                text(s.get("flavor")),
                text(s.get("version")),
                text(s.get("binary")),
                text(STANDIN_LABEL if s.get("standin") else _root_note(s.get("root"))),
            ]
        )
    return table


def allocators_table(run: Run) -> Table:
    table = Table(
        "allocators",
        "Allocators",
        "Each allocator as loaded: the library preloaded by absolute path (none for glibc"
        " or a server's built-in allocator), its package version, and any environment or"
        " GLIBC_TUNABLES the variant sets.",
        ["allocator", "version", "library", "package", "environment / tunables"],
    )
    seen = set()
    for c in run.cells.values():
        a = c.get("allocator") or {}
        if not a.get("name") or a["name"] in seen or "library" not in a and "kind" not in a:
            continue
        seen.add(a["name"])
        env = [f"{k}={v}" for k, v in (a.get("env") or {}).items()] + list(a.get("tunables") or [])
        table.rows.append(
            [
                text(a["name"]),
                text(a.get("version")),
                text(a.get("library") or "(no preload)"),
                text(a.get("package")),
                text(" ".join(env)),
            ]
        )
    return table


def _root_note(root: dict | None) -> str:
    if not root:
        return ""
    where = f"{root.get('release') or '?'}, glibc {root.get('glibc') or '?'}"
    return f"in root {root.get('path')} ({where})"
