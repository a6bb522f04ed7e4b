"""Upgrading a run directory read from disk to the current format, one version at a time.

Modelled on asv's results.py (`api_version` + `update_to_N`) and pyperf's format history: each
format N+1 has one function `update_to_<N+1>` that takes what a format-N reader would see and
returns what the format-(N+1) writer would have written, saying in its doc what changed. The
upgrade happens in memory only; a run directory on disk is never rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rundir.errors import RunDirError
from rundir.format import (
    FORMAT5_ADDED_COLUMNS,
    FORMAT6_ADDED_COLUMNS,
    FORMAT_VERSION,
    RAW_VERSION,
    RESULTS_COLUMNS,
    SPAN_LEVEL,
    SPAN_WINDOW,
)


@dataclass
class RawRun:
    """manifest.json and results.csv as read (rows typed), before the reader builds a Run."""

    manifest: dict
    columns: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)


def update_to_2(raw: RawRun) -> RawRun:
    """Format 1 -> 2.

    Format 1 changed meaning without changing its number: runs recorded before 2026-11-22 hold
    whole-level CPU and context switches in cpu_user_s/cpu_sys_s/ctxsw_*/cpu_us_per_op/
    ctxsw_per_op, later ones the same figures over the level's measured window (and the columns
    window_s, window_ops, ctxsw_source, cpu_s_per_1m_ops, ctxsw_per_1m_ops, threads_connected,
    thp_fault_fallback with them). Readers told the two apart by looking for window_s. Format 2
    records it: figures.cpu_ctxsw_span is "window" or "level".

    Also: ctxsw_source per row is filled from the cell's record where the row lacks it (the
    oldest runs kept it in cells[].collectors only); every current results column exists in every
    row (None where the run did not record it); tool.version is kept as written (format-1 runs say
    "0.1.0", a constant that never followed the package).
    """
    manifest = dict(raw.manifest)
    span = SPAN_WINDOW if "window_s" in raw.columns else SPAN_LEVEL
    manifest["figures"] = {**(manifest.get("figures") or {}), "cpu_ctxsw_span": span}
    cells = {str(c.get("id")): c for c in manifest.get("cells") or [] if isinstance(c, dict)}
    rows = []
    for row in raw.rows:
        row = dict(row)
        if not row.get("ctxsw_source"):
            cell = cells.get(str(row.get("cell")), {})
            src = cell.get("ctxsw_source") or (cell.get("collectors") or {}).get("ctxsw_source")
            row["ctxsw_source"] = str(src) if src else ""
        for col in RESULTS_COLUMNS:
            row.setdefault(col, "" if col == "ctxsw_source" else None)
        rows.append(row)
    columns = list(raw.columns) + [c for c in RESULTS_COLUMNS if c not in raw.columns]
    # A format-1 run directory with no results.csv yet (no cell finished) has no columns at all.
    if not raw.columns:
        columns = []
    return RawRun(manifest=manifest, columns=columns, rows=rows)


def update_to_3(raw: RawRun) -> RawRun:
    """Format 2 -> 3.

    Format 3 keeps what each cell observed in raw/<cell>.json and derives its results rows from
    it (rundir.derive), so `report --rederive` can derive them again after a fix. Runs of format
    1 and 2 have no raw records: figures.raw_records is False (their figures are as recorded, and
    --rederive keeps them), and every cell gets derive_error None (their figures were computed
    during the run; an error there had aborted the run instead). Results columns are unchanged.
    """
    manifest = dict(raw.manifest)
    manifest["figures"] = {**(manifest.get("figures") or {}), "raw_records": False}
    manifest["cells"] = [
        {**c, "derive_error": c.get("derive_error")} if isinstance(c, dict) else c
        for c in manifest.get("cells") or []
    ]
    return RawRun(manifest=manifest, columns=list(raw.columns), rows=list(raw.rows))


# Format 3 recorded every server family's [server] settings in every suite, each family's with
# its defaults where the suite was of another family; format 4 records only the suite's own
# family's. The keys one family alone had in format 3, by the flavors of that family (frozen
# history: what format 3 wrote, not what the families are now).
_FORMAT3_SERVER_KEYS = {
    ("mariadb", "mysql", "percona"): (
        "basedir",
        "fetched",
        "buffer_pool_mb",
        "engines",
        "rocksdb_block_cache_mb",
        "rocksdb_write_buffer_mb",
        "settings",
    ),
    ("mongodb",): ("cache_gb",),
}


def update_to_4(raw: RawRun) -> RawRun:
    """Format 3 -> 4.

    Format 4 makes server families plugins. What a reader sees of it in the manifest: the suite's
    [server] section holds only its family's settings; format 3 held every family's (a MariaDB
    suite recorded MongoDB's cache_gb, a MongoDB suite MySQL's buffer_pool_mb, engines,
    settings... at their defaults), so here the other families' keys are dropped, and a compare
    of a format-3 run with a format-4 one sees no setting that was never the suite's.
    Raw records change too (raw_version 2: counters by meaning, typed level records, ctxsw_*
    names); they are upgraded when read (upgrade_raw). Results columns are unchanged.
    """
    manifest = dict(raw.manifest)
    # -- plugins (issue 24): the [server] section as its family declares it --------------------
    suite = manifest.get("suite")
    server = suite.get("server") if isinstance(suite, dict) else None
    if isinstance(server, dict):
        flavor = server.get("flavor", "mariadb")
        foreign = {
            key for owners, keys in _FORMAT3_SERVER_KEYS.items() if flavor not in owners
            for key in keys
        }  # fmt: skip
        manifest["suite"] = {
            **suite, "server": {k: v for k, v in server.items() if k not in foreign}
        }  # fmt: skip
    return RawRun(manifest=manifest, columns=list(raw.columns), rows=list(raw.rows))


def update_to_5(raw: RawRun) -> RawRun:
    """Format 4 -> 5.

    Format 5 studies huge pages, takes RSS apart, and lets a run hold several servers.

    Results gain HUGEPAGE_COLUMNS (the server's ShmemPmdMapped and hugetlb pages, the buffer
    pool's and the heap's huge pages, HugePages_Total/Free/Rsvd, compaction's and khugepaged's
    cost per level) and the memory parts (rundir.format.FORMAT5_ADDED_COLUMNS has both: RSS by
    mapping at each level's end: heap, buffer pool, stacks, file, swap, hugetlb, the heap's huge
    pages; what the allocator holds resident beyond what the server uses; the fragmentation
    scenarios' cycle and burst release). A format-4 run measured none of them: every row gets
    them empty (None), which the tables show as "not recorded", never as zero. Its cells' thp
    records are what they were (a THP mode with defrag left as the suite said): readers take a
    missing setting as that. Raw boundaries may hold a `hugepages` reading and `parts`, a level
    a `scenario` record (absent in older records: nothing to upgrade; raw_version stays 2).
    Older timelines simply lack the parts' columns.

    The manifest records the run's servers (an upgrade check: [server] servers): see
    servers_of_older_run.
    """
    added = FORMAT5_ADDED_COLUMNS
    rows = [{**dict.fromkeys(added), **row} for row in raw.rows]
    columns = list(raw.columns)
    if columns:
        columns += [c for c in added if c not in columns]
    return RawRun(manifest=servers_of_older_run(raw.manifest), columns=columns, rows=rows)


def servers_of_older_run(manifest: dict) -> dict:
    """The manifest with format 5's `servers` and `design.baseline_server`.

    Format 5 records every server of a run (one entry per server: name, label, flavor, version,
    binary, root, glibc, its allocator builds) and `design.baseline_server`. A run of an older
    format measured one server (or one per engine, labelled LABEL+ENGINE): `servers` gets one
    entry per server label its cells name, without a name (the label is the server's only name)
    and without the details older runs kept per cell only; `design.baseline_server` is None (no
    server is compared with another). Cells are unchanged.
    """
    manifest = dict(manifest)
    if not isinstance(manifest.get("servers"), list):
        labels: dict[str, dict] = {}
        for c in manifest.get("cells") or []:
            srv = c.get("server") if isinstance(c, dict) else None
            if not isinstance(srv, dict) or not srv.get("label"):
                continue
            label = str(srv["label"])
            engine = c.get("engine")
            if engine and engine != "innodb" and label.endswith(f"+{engine}"):
                label = label[: -len(engine) - 1]
            entry = labels.setdefault(label, {"name": "", "label": label})
            for key in ("flavor", "version", "version_string", "binary"):
                if srv.get(key) is not None:
                    entry.setdefault(key, srv[key])
        manifest["servers"] = list(labels.values())
    design = manifest.get("design")
    if isinstance(design, dict) and "baseline_server" not in design:
        manifest["design"] = {**design, "baseline_server": None}
    return manifest


def update_to_6(raw: RawRun) -> RawRun:
    """Format 5 -> 6.

    Format 6 adds results columns (rundir.format.FORMAT6_ADDED_COLUMNS): the allocator's exposure
    per query, the ramp left out of each level's window, and the allocator's in-use memory split
    into resident and untouched. A format-5 run measured none of them: every row gets them empty
    (None), shown as "not recorded", never as zero. The manifest is unchanged.
    """
    added = FORMAT6_ADDED_COLUMNS
    rows = [{**dict.fromkeys(added), **row} for row in raw.rows]
    columns = list(raw.columns)
    if columns:
        columns += [c for c in added if c not in columns]
    return RawRun(manifest=raw.manifest, columns=columns, rows=rows)


# format N -> the function upgrading a format-N run to N+1
MIGRATIONS: dict[int, Callable[[RawRun], RawRun]] = {
    1: update_to_2,
    2: update_to_3,
    3: update_to_4,
    4: update_to_5,
    5: update_to_6,
}


# -- raw records (raw/<cell>.json, their own raw_version) ---------------------------------------

# What rundir.derive read from a raw_version-1 record's boundary status, before families named
# their counters (frozen history: the names format 3 derived its status columns from, for every
# family; a family without them got empty columns, as it still does).
_RAW1_COUNTERS = {
    "threads_created": "Threads_created",
    "clients_connected": "Threads_connected",
    "pages_read_from_disk": "Innodb_buffer_pool_reads",
    "page_read_requests": "Innodb_buffer_pool_read_requests",
    "memory_used_bytes": "Memory_used",
}
# Where a raw_version-1 level's untyped `extra` keys go in the typed records of version 2.
_RAW1_SYSBENCH = (
    "latency_histogram", "lat_min_ms", "sysbench_percentile", "problems", "partial",
    "stopped_early", "argv", "records", "wall_s", "exit", "nofile", "priority", "follow",
    "client_hosts", "split", "common_window",
)  # fmt: skip
_RAW1_IIBENCH = (
    "rows", "duration_s", "per_client", "client_cpu_s", "client_life_cpu_s", "client_mode",
    "startup_s", "batch_rows", "secondary_indexes", "latency_unit", "query", "wall_s",
)  # fmt: skip
_RAW1_RWW = (
    "engine", "client_cpu_s", "client_life_cpu_s", "per_reader_reads", "misses", "capped",
    "latency_unit",
)  # fmt: skip
# Keys only one of them wrote: which workload's record a version-1 level's extra was.
_RAW1_ONLY_SYSBENCH = {"latency_histogram", "lat_min_ms", "sysbench_percentile", "argv", "records",
                       "nofile", "priority", "follow", "client_hosts", "split", "common_window",
                       "stopped_early", "partial"}  # fmt: skip
_RAW1_ONLY_IIBENCH = {"per_client", "client_mode", "startup_s", "batch_rows", "query"}


def _raw1_snap(snap):
    if not isinstance(snap, dict):
        return snap
    out = {k: v for k, v in snap.items() if k not in ("ctx_voluntary", "ctx_involuntary")}
    for old in ("ctx_voluntary", "ctx_involuntary"):
        if old in snap:
            out["ctxsw_" + old.removeprefix("ctx_")] = snap[old]
    return out


def _raw1_phase(ph):
    if not isinstance(ph, dict):
        return ph
    out = dict(ph)
    for key in ("start", "end"):
        b = ph.get(key)
        if isinstance(b, dict):
            out[key] = {**b, "snap": _raw1_snap(b.get("snap"))}
    out["first_server"] = _raw1_snap(ph.get("first_server"))
    if isinstance(ph.get("marks"), list):
        out["marks"] = [_raw1_snap(m) for m in ph["marks"]]
    return out


def _raw1_level(level):
    """A version-1 level: its untyped extra sorted into the typed records."""
    if not isinstance(level, dict):
        return level
    out = {k: v for k, v in level.items() if k != "extra"}
    extra = dict(level.get("extra") or {})
    for key, to in (("client_load", "client_load"), ("client_host_level", "agent")):
        if key in extra:
            out[to] = extra.pop(key)
    if "row" in extra:
        out["churn"] = extra.pop("row")
    if "rww" in extra:
        out["rww"] = {"figures": extra.pop("rww")}
        out["rww"].update({k: extra.pop(k) for k in _RAW1_RWW if k in extra})
    elif set(extra) & _RAW1_ONLY_SYSBENCH:
        out["sysbench"] = {k: extra.pop(k) for k in _RAW1_SYSBENCH if k in extra}
    elif set(extra) & _RAW1_ONLY_IIBENCH:
        out["iibench"] = {k: extra.pop(k) for k in _RAW1_IIBENCH if k in extra}
    if extra:
        out["legacy_extra"] = extra
    return out


def upgrade_raw(raw: dict, where: str) -> dict:
    """A raw record in the current raw_version (in memory; the file is never rewritten), or
    RunDirError for a version this mallocsweep does not know.

    Version 1 -> 2 (format 4): the snapshots' ctx_voluntary/ctx_involuntary become ctxsw_*, as
    results.csv calls them; `counters` says which status counters the record's derivations read
    (the ones format 3 always read); each level's untyped `extra` goes into the typed records
    (sysbench, iibench, rww, churn from `row`, client_load, agent from `client_host_level`).
    """
    version = raw.get("raw_version") if isinstance(raw, dict) else None
    if version == RAW_VERSION:
        return raw
    if version != 1:
        raise RunDirError(
            f"{where}: raw_version {version!r} (this mallocsweep reads 1 to {RAW_VERSION}); "
            "upgrade mallocsweep to read it"
        )
    out = dict(raw)
    out["raw_version"] = RAW_VERSION
    out.setdefault("counters", dict(_RAW1_COUNTERS))
    if isinstance(raw.get("phases"), dict):
        out["phases"] = {n: _raw1_phase(p) for n, p in raw["phases"].items()}
    if isinstance(raw.get("levels"), list):
        out["levels"] = [_raw1_level(lv) for lv in raw["levels"]]
    return out


def check_version(manifest: dict, where: str) -> int:
    """The manifest's format version, if this mallocsweep can read it; else RunDirError (a newer
    format says to upgrade mallocsweep). Checked before anything else of the run is read."""
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunDirError(
            f"{where}: format_version {version!r} is not a mallocsweep run format "
            f"(expected 1..{FORMAT_VERSION})"
        )
    if version > FORMAT_VERSION:
        raise RunDirError(
            f"{where}: written by a newer mallocsweep (run format {version}, this one reads up to "
            f"{FORMAT_VERSION}); upgrade mallocsweep to read it"
        )
    return version


def migrate(raw: RawRun, where: str) -> RawRun:
    """The run in the current format. RunDirError for an unknown or newer format."""
    version = on_disk = check_version(raw.manifest, where)
    while version < FORMAT_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:  # a bug of ours: every version below the current one has a step
            raise RunDirError(f"{where}: no migration from run format {version}")
        raw = step(raw)
        version += 1
        raw.manifest["format_version"] = version
    # Said in the report's metadata: figures of an upgraded run are as its format recorded them.
    raw.manifest["format_version_on_disk"] = on_disk
    return raw
