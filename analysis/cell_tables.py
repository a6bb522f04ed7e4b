"""Per-cell tables: the allocator proof, failures with their reasons, the collectors'
reconciliation, and the run's metadata (host, servers, allocators)."""

from __future__ import annotations

from analysis import run_design
from analysis.point_tables import STANDIN_LABEL
from analysis.table_model import Cell, Table, fmt, num, text
from analysis.workload_words import words
from rundir.read import Run


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


def _base(path) -> str:
    return str(path).rsplit("/", 1)[-1] if path else ""


def _bound_text(ver: dict) -> str:
    """Where malloc and free are bound, and what is mapped without serving anything."""
    bound = ver.get("bound_to")
    if bound is None:
        return ""  # a run from before the binding proof
    libs = sorted({_base(p) for sym in ("malloc", "free") for p in bound.get(sym) or []})
    out = ", ".join(libs) if libs else "nothing bound"
    idle = ver.get("mapped_not_bound") or []
    if idle:
        out += f" (also mapped, serving nothing: {', '.join(_base(p) for p in idle)})"
    return out


def proof_table(run: Run) -> Table:
    table = Table(
        "proof-cells",
        "Allocator proof per cell",
        "A cell is one server life under one allocator. Before measuring, mallocsweep checks that the"
        " allocator really serves malloc: the server's malloc and free (in its executable, and in"
        " libstdc++ behind operator new) are bound to the allocator's library — read from the"
        " running process's GOT — and the binary does not define malloc itself. Another"
        " allocator library merely mapped beside it (one the binary links itself, that lost the"
        " binding to the preload) is shown but serves nothing. The server's own"
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
            "malloc/free bound to",
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
        if (ver.get("builtin") or {}).get("label"):  # the allocator a binary links itself
            name = ver["builtin"]["label"]
        table.rows.append(
            [
                text(cid),
                text(c.get("status")),
                text(srv or server.get("label")),
                text(name),
                text(alloc.get("library") or ("built in / no preload" if name else "")),
                text(_mapped_text(_first(ver, "mapped", "library_mapped"), alloc.get("library"))),
                text(_bound_text(ver)),
                text(_defines_malloc(ver)),
                text(ver.get("server_reported")),
                text(_first(ver, "agreement", "server_agreement")),
                text(ver.get("verdict")),
            ]
        )
    return table


def proof_summary_table(run: Run) -> Table:
    """The proof folded to one line per arm: how many of its cells were verified, and what
    malloc and free were bound to (the per-cell tables stay, collapsed, below it)."""
    t = Table(
        "proof",
        "Allocator proof, per arm",
        "Before measuring, every cell (one server life) proved that the allocator it names "
        "serves malloc: the server's malloc and free are bound to the allocator's library "
        "(read from the running process's GOT) and the binary does not define malloc itself. "
        "One line per arm; the per-cell proof and binding tables are below, collapsed.",
        ["arm", "proof"],
    )
    by: dict[str, list[dict]] = {}
    for c in run.cells.values():
        name = str((c.get("allocator") or {}).get("name") or "")
        if c.get("status") in ("pending", "running"):
            continue
        by.setdefault(name, []).append(c)
    for name, cs in by.items():
        vers = [c.get("verification") or {} for c in cs]
        ok = [v for v in vers if str(v.get("verdict") or "").startswith("verified")]
        bound = sorted({_bound_text(v) for v in ok if _bound_text(v)})
        what = f"malloc and free bound to {'; '.join(bound)}" if bound else "verified"
        line = f"{len(ok)} of {len(cs)} cells: {what}"
        other = [
            str(v.get("verdict") or "no proof (the cell failed first)") for v in vers if v not in ok
        ]
        if other:
            line += "; not verified: " + ", ".join(
                f"{n} x {w}" for w, n in ((w, other.count(w)) for w in dict.fromkeys(other))
            )
        t.rows.append([text(name), text(line)])
    return t


def binding_table(run: Run) -> Table:
    """Per cell, the GOT entries behind the proof: malloc and free one by one (GOT address, the
    address found there, the library holding it), the rest of the family grouped by library."""
    table = Table(
        "binding",
        "Malloc binding per cell",
        "Read from the running server: each imported malloc-family function (malloc, free, calloc,"
        " ..., operator new/delete) is called through a GOT entry that the dynamic loader fills"
        " with the address of the library that won the symbol. 'GOT' is the entry's address in"
        " the process, 'target' the address found in it, 'library' the mapped file holding that"
        " address. 'unbound' is an entry not yet called (lazy binding), which proves nothing"
        " either way.",
        ["cell", "object", "symbol", "GOT", "target", "library"],
    )
    for cid, c in run.cells.items():
        binding = (c.get("verification") or {}).get("binding") or {}
        rest: dict[tuple[str, str], list[str]] = {}
        for e in binding.get("entries") or []:
            where = e.get("library") if e.get("state") in ("bound", "self") else e.get("state")
            if e.get("symbol") in ("malloc", "free"):
                table.rows.append(
                    [text(cid), text(_base(e.get("object"))), text(e["symbol"]), text(e.get("got")),
                     text(e.get("target")), text(where)]
                )  # fmt: skip
            else:
                rest.setdefault((_base(e.get("object")), str(where)), []).append(e["symbol"])
        for (obj, where), syms in sorted(rest.items()):
            shown = ", ".join(sorted(syms)[:6]) + (
                f", … ({len(syms)} in all)" if len(syms) > 6 else ""
            )
            table.rows.append([text(cid), text(obj), text(shown), text(""), text(""), text(where)])
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
    load = words(run.kind).load_section  # an iibench suite's kind is its one workload's name
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
        # A load that builds its own table (iibench): its settings are the dataset that matters.
        (
            ("load", ", ".join(f"{k}={v}" for k, v in (run.suite.get(load) or {}).items()))
            if load
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
        # how arms were compared: every verdict of the run comes from this design
        ("design", run_design.words(run.manifest)),
        (
            "tool",
            f"{(run.manifest.get('tool') or {}).get('name', 'mallocsweep')} "
            f"{(run.manifest.get('tool') or {}).get('version', '?')}",
        ),
        ("run format", format_text(run)),
        *_fleet_rows(run),
    ]
    return rows


def _fleet_rows(run: Run) -> list[tuple[str, str]]:
    """Where the rounds ran when the run is merged from shards (`mallocsweep merge`), and where
    the clients ran when they had a host of their own."""
    out = []
    merged = run.manifest.get("merged") or {}
    if merged.get("shards"):
        shards = "; ".join(
            f"shard {s.get('index')} on {s.get('hostname') or '?'} (round "
            f"{', '.join(map(str, s.get('rounds') or []))})"
            for s in merged["shards"]
        )
        out.append(("merged from", f"{merged.get('count')} shards, whole rounds: {shards}"))
        for d in merged.get("host_differences") or []:
            out.append(("shard hosts", d))
    clients = run.manifest.get("clients") or {}
    if clients.get("host"):
        out.append(
            (
                "clients",
                f"sysbench on {clients['host']} ({clients.get('sysbench_version', '?')}) over "
                f"TCP to {clients.get('server_address', '?')}",
            )
        )
    return out


def format_text(run: Run) -> str:
    """The run directory's format as written, and what an upgrade in memory means for its figures."""
    now = run.manifest.get("format_version")
    was = run.manifest.get("format_version_on_disk", now)
    if was == now:
        return str(now)
    span = (run.manifest.get("figures") or {}).get("cpu_ctxsw_span")
    cover = "each level's measured window" if span == "window" else "each whole level"
    return (
        f"{was}, read as {now} (upgraded in memory, the files unchanged); its CPU and context"
        f" switches cover {cover}"
    )


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
        # a run with several servers may run one build under two names (a server A/A check)
        key = (s.get("name"), s.get("flavor"), s.get("version"), s.get("binary"))
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
        # several servers: each its own builds (a server root has its own allocator packages)
        server = (c.get("server") or {}).get("name") or ""
        if (
            not a.get("name")
            or (server, a["name"]) in seen
            or "library" not in a
            and "kind" not in a
        ):
            continue
        seen.add((server, a["name"]))
        env = [f"{k}={v}" for k, v in (a.get("env") or {}).items()] + list(a.get("tunables") or [])
        table.rows.append(
            [
                text(a["name"] + (f" ({server})" if server else "")),
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
