"""Join the shards of one matrix (`run --shard K/N` on N hosts) into one run directory.

Shards are joined only when they are parts of the same measurement: the same suite settings, the
same tool version, the same server and allocator builds, servers that ran with the same settings
(what each cell's server recorded: cells[].server.settings), hosts of the same kind (CPU, core
count, memory, kernel, glibc, system THP mode), and exactly the shards 1..N of one split, each
once. Any
other combination is refused with one line naming the runs and what differs, before anything is
written. Differences that do not change what an allocator does (host names, boot ids, CPU
governor) are listed, like `compare` lists them, and recorded in the merged manifest.

The merged directory holds copies (the shards stay as they are): every cell record, timeline and
log directory under its own name (cell ids are unique across shards: they name the round), and a
manifest whose cells are in the whole plan's order; results.csv is rebuilt from the cell records.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

from rundir.admissible import ROUND_SUFFIX, same_lives
from rundir.errors import RunDirError
from rundir.format import CELLS_DIR, DERIVED_DIR, LOGS_DIR, RAW_DIR, SAMPLES_DIR
from rundir.integrity import CELLS_TRUTH, check_run
from rundir.write import RunDir, make_owned_dir, now_iso
from suites.errors import SuiteError

# Host facts that change what an allocator does (collectors.host.host_metadata's keys): shards
# whose hosts differ in one of them are different kinds of host and are never merged.
HOST_KIND_KEYS = ("machine", "cpu_model", "cpu_count", "cpu_usable", "kernel", "glibc_version")
# Identical machines report slightly different MemTotal (firmware reservations): within this share.
MEMORY_TOLERANCE = 0.02
# Listed, not refused: facts of one host that are not its kind.
HOST_NOTED_KEYS = ("hostname", "kernel_version", "cpu_governor", "python", "perf_event_paranoid")
# Suite settings that may differ between shards: where each host wrote its run.
SUITE_KEYS_FREE = frozenset({"run.out"})


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


class Shard:
    """One shard's run directory as merge reads it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        # Every shard passes the integrity check: its cell records are what is merged, so one
        # that lacks any (cells/ gone, a record missing or damaged) is refused, named.
        try:
            found = check_run(self.path)
        except RunDirError as e:
            raise SuiteError(str(e)) from None
        if found.truth != CELLS_TRUTH:
            raise SuiteError(
                f"{self.path}: a format-{found.version} run without {CELLS_DIR}/: no cell records "
                "to merge"
            )
        if found.gaps:
            raise SuiteError(
                found.refusal("merge copies every cell record of every shard; nothing was written")
            )
        self.repaired = [*found.repaired, *found.notes]
        self.manifest = found.manifest
        self.shard = self.manifest.get("shard")
        if not isinstance(self.shard, dict):
            raise SuiteError(
                f"{self.path}: not a shard (run without --shard K/N); only shards are merged"
            )
        self.run_id = str(self.manifest.get("run_id") or self.path.name)

    @property
    def identity(self) -> tuple:
        """What tells two runs apart even when copied elsewhere (run ids alone can coincide: two
        hosts that start their shards in the same second)."""
        m = self.manifest
        return (self.run_id, self.shard.get("index"), m.get("started_at"), self.host.get("boot_id"))

    @property
    def label(self) -> str:
        return f"{self.shard.get('index')}/{self.shard.get('count')}"

    @property
    def host(self) -> dict:
        return self.manifest.get("host") or {}


def check_shards(shards: list[Shard]) -> list[str]:
    """Refuse (SuiteError, one line) shards that are not parts of one measurement; return the
    host differences that are only listed."""
    if len(shards) < 2:
        raise SuiteError("merge needs the run directories of at least two shards")
    seen: dict[str, tuple] = {}
    for s in shards:
        real = str(s.path.resolve())
        if real in seen or s.identity in seen.values():
            raise SuiteError(f"{s.path}: given twice: a run cannot be merged with itself")
        seen[real] = s.identity
    first = shards[0]
    fs = _flatten(first.manifest.get("suite") or {})
    for s in shards[1:]:
        ss = _flatten(s.manifest.get("suite") or {})
        diff = sorted(
            k for k in set(fs) | set(ss) if k not in SUITE_KEYS_FREE and fs.get(k) != ss.get(k)
        )
        if diff:
            k = diff[0]
            raise SuiteError(
                f"{s.path} is from a different suite than {first.path}: {k} = {ss.get(k)!r} vs "
                f"{fs.get(k)!r}"
                + (f" (and {len(diff) - 1} more setting(s))" if len(diff) > 1 else "")
            )
        tv = (first.manifest.get("tool") or {}).get("version")
        sv = (s.manifest.get("tool") or {}).get("version")
        if tv != sv:
            raise SuiteError(
                f"{s.path} was written by mallocsweep {sv}, {first.path} by {tv}: shards of one "
                "run come from one tool version"
            )
        # (server, allocator): a run with several servers has each server's own builds
        fa = {_build(a): a for a in first.manifest.get("allocators") or []}
        sa = {_build(a): a for a in s.manifest.get("allocators") or []}
        for build in sorted(set(fa) | set(sa)):
            a, b = fa.get(build) or {}, sa.get(build) or {}
            name = build[1] + (f" of server {build[0]!r}" if build[0] else "")
            # sha256: the library's own bytes, so a rebuilt allocator of the same package
            # version (a local patch, another distribution's build) is another allocator
            for key in ("version", "sha256", "library", "env"):
                if _norm(key, a.get(key)) != _norm(key, b.get(key)):
                    raise SuiteError(
                        f"allocator {name} differs between shards: {key} {b.get(key)!r} on "
                        f"{s.path} vs {a.get(key)!r} on {first.path}"
                    )
        _check_design(first, s)
        fl, sl = _labels(first), _labels(s)
        if fl != sl:
            raise SuiteError(
                f"{s.path} measured {', '.join(sorted(sl))}, {first.path} "
                f"{', '.join(sorted(fl))}: shards of one run measure one server"
            )
        _check_server_builds(first, s)
        _check_server_settings(first, s)
    _check_lives(shards)
    noted = _check_hosts(shards)
    _check_split(shards)
    for s in shards:
        status = s.manifest.get("status")
        if status != "finished":
            raise SuiteError(
                f"{s.path} (shard {s.label}) is {status}: finish it with "
                f"`mallocsweep run --resume {s.path}` before merging"
            )
    return noted


def _norm(key: str, value):
    """A digest is hex: its case says nothing (a tool that prints it upper case names the same
    bytes)."""
    if key == "sha256" and isinstance(value, str):
        return value.strip().lower()
    return value


def _check_design(first: Shard, s: Shard) -> None:
    """The verdicts' design (error rate, minimum effect, looks, baseline, A/A arm) is one for the
    whole run: the merged run is judged with one, so shards planned with others are not parts of
    it."""
    fd, sd = first.manifest.get("design") or {}, s.manifest.get("design") or {}
    if not isinstance(fd, dict) or not isinstance(sd, dict):
        return
    diff = sorted(k for k in set(fd) | set(sd) if fd.get(k) != sd.get(k))
    if diff:
        k = diff[0]
        raise SuiteError(
            f"{s.path} was planned with another design than {first.path}: design.{k} = "
            f"{sd.get(k)!r} vs {fd.get(k)!r}"
            + (f" (and {len(diff) - 1} more field(s))" if len(diff) > 1 else "")
            + "; shards of one run share one design"
        )


# What tells one server build from another, as a cell records its server: the same label
# (flavor and version) can be another build (another package revision: the version string
# carries it, e.g. 10.11.19-MariaDB-0+deb12u1; a local patch or another packager's build of the
# same version does not: the binary's sha256 does). Paths are compared only where a run recorded
# no sha256 (before binaries were hashed): hosts of a fleet may keep a server root or basedir in
# different places, but without a digest a different path is a binary nothing proves the same.
SERVER_BUILD_KEYS = ("flavor", "version", "version_string")


def _server_builds(s: Shard) -> dict[str, dict]:
    """label -> the build facts of that server, from the shard's cells."""
    out: dict[str, dict] = {}
    for c in s.manifest.get("cells") or []:
        srv = c.get("server") or {}
        if srv.get("label"):
            out.setdefault(
                srv["label"],
                {k: srv.get(k) for k in (*SERVER_BUILD_KEYS, "sha256", "binary")},
            )
    return out


def _check_server_builds(first: Shard, s: Shard) -> None:
    fb, sb = _server_builds(first), _server_builds(s)
    for label in sorted(set(fb) & set(sb)):
        for key in SERVER_BUILD_KEYS:
            a, b = fb[label].get(key), sb[label].get(key)
            if a != b:
                raise SuiteError(
                    f"server {label} differs between shards: {key} {b!r} on {s.path} vs {a!r} "
                    f"on {first.path}; shards of one run measure one server build"
                )
        da, db = _norm("sha256", fb[label].get("sha256")), _norm("sha256", sb[label].get("sha256"))
        if da and db:
            if da != db:
                raise SuiteError(
                    f"server {label} differs between shards: binary sha256 {db} "
                    f"({sb[label].get('binary')}) on {s.path} vs {da} ({fb[label].get('binary')}) "
                    f"on {first.path}; shards of one run measure one server build"
                )
            continue
        pa, pb = fb[label].get("binary"), sb[label].get("binary")
        if pa != pb:
            raise SuiteError(
                f"server {label} differs between shards: binary {pb!r} on {s.path} vs {pa!r} on "
                f"{first.path}, and no sha256 of them was recorded to prove them one build; "
                "shards of one run measure one server build"
            )


def _server_settings(s: Shard) -> list[tuple[str, str, str, dict]]:
    """(arm: a cell id without its round, server label, cell id, its server's settings as
    "key" -> value) of every cell of the shard that recorded them."""
    out = []
    for c in s.manifest.get("cells") or []:
        srv = c.get("server") if isinstance(c.get("server"), dict) else {}
        if isinstance(srv.get("settings"), dict):
            arm = ROUND_SUFFIX.sub("", str(c.get("id")))
            out.append((arm, str(srv.get("label")), str(c.get("id")), _flatten(srv["settings"])))
    return out


def _uniform(cells: list[tuple[str, str, str, dict]]) -> dict[str, tuple[str, dict, set]]:
    """server label -> (a cell of it, the settings every cell of that server ran with in the
    shard, the keys on which its cells differ): a hugepage study's large-pages cells differ from
    its small-pages cells by design, so such a key is compared arm by arm only."""
    by_label: dict[str, list[tuple[str, dict]]] = {}
    for _arm, label, cid, flat in cells:
        by_label.setdefault(label, []).append((cid, flat))
    out = {}
    for label, group in by_label.items():
        keys = set().union(*(flat for _cid, flat in group))
        varies = {k for k in keys if len({repr(flat.get(k)) for _cid, flat in group}) > 1}
        out[label] = (group[0][0], {k: group[0][1].get(k) for k in keys - varies}, varies)
    return out


def _check_server_settings(first: Shard, s: Shard) -> None:
    """What each cell's server ran with (its buffer pool, connections, flush policy...): the
    suite's settings can agree while a shard's servers ran with others (a shard resumed or edited
    by hand), and its lives would be paired with lives of another configuration. Compared arm by
    arm (every setting), and server by server (the settings each shard's cells of it share)."""
    fa, sa = _server_settings(first), _server_settings(s)
    firsts = {arm: (cid, flat) for arm, _label, cid, flat in reversed(fa)}
    pairs = [
        (firsts[arm], (cid, flat), set(flat) | set(firsts[arm][1]))
        for arm, _label, cid, flat in sa
        if arm in firsts
    ]
    fu, su = _uniform(fa), _uniform(sa)
    for label in sorted(set(fu) & set(su)):
        (fc, fv, fvar), (sc, sv, svar) = fu[label], su[label]
        pairs.append(((fc, fv), (sc, sv), (set(fv) | set(sv)) - fvar - svar))
    for (fc, fv), (sc, sv), keys in pairs:
        diff = sorted(k for k in keys if fv.get(k) != sv.get(k))
        if diff:
            k = diff[0]
            more = f" (and {len(diff) - 1} more setting(s))" if len(diff) > 1 else ""
            raise SuiteError(
                f"{s.path} ran its servers with other settings than {first.path}: "
                f"server.settings.{k} = {sv.get(k)!r} (cell {sc}) vs {fv.get(k)!r} (cell {fc})"
                f"{more}; shards of one run measure one server configuration"
            )


def _check_lives(shards: list[Shard]) -> None:
    """The same server life in two shards (one shard's cells copied and relabelled as other
    rounds) would count one measurement twice: refused, as `compare` refuses a run against its
    own copy."""
    cells = [dict(c, _shard=s) for s in shards for c in s.manifest.get("cells") or []]
    groups = same_lives(cells)
    if groups:
        g = groups[0]
        where = " and ".join(f"{c['id']} of {c['_shard'].path}" for c in g)
        raise SuiteError(
            f"{where} are the same server life (started {g[0].get('started_at')}, pid "
            f"{(g[0].get('verification') or {}).get('pid')}): a shard holds a copy of another's "
            "cells; nothing was written"
        )


def _build(a: dict) -> tuple[str, str]:
    return str(a.get("server") or ""), str(a.get("name"))


def _labels(s: Shard) -> set[str]:
    out = set()
    for c in s.manifest.get("cells") or []:
        srv = c.get("server") or {}
        label = srv.get("label")
        if label:
            out.add(label)
    return out


def _check_hosts(shards: list[Shard]) -> list[str]:
    first = shards[0]
    noted = []
    for s in shards[1:]:
        a, b = first.host, s.host
        for k in HOST_KIND_KEYS:
            if a.get(k) != b.get(k):
                raise SuiteError(
                    f"different host kinds: {k} is {b.get(k)!r} on {s.path} ({b.get('hostname')}) "
                    f"vs {a.get(k)!r} on {first.path} ({a.get('hostname')}); shards are merged "
                    "only from identical hosts"
                )
        ma, mb = a.get("memory_kb"), b.get("memory_kb")
        if ma != mb and (not ma or not mb or abs(ma - mb) > MEMORY_TOLERANCE * max(ma, mb)):
            raise SuiteError(
                f"different host kinds: memory_kb is {mb!r} on {s.path} vs {ma!r} on "
                f"{first.path}; shards are merged only from identical hosts"
            )
        ta, tb = a.get("thp") or {}, b.get("thp") or {}
        for k in ("enabled", "defrag"):
            if ta.get(k) != tb.get(k):
                raise SuiteError(
                    f"different host kinds: system THP {k} is {tb.get(k)!r} on {s.path} vs "
                    f"{ta.get(k)!r} on {first.path}"
                )
        for k in HOST_NOTED_KEYS:
            if a.get(k) != b.get(k):
                noted.append(
                    f"host {k} differs: {a.get(k)!r} (shard {first.label}) vs {b.get(k)!r} "
                    f"(shard {s.label})"
                )
        if ma != mb:
            noted.append(
                f"host memory_kb differs: {ma} (shard {first.label}) vs {mb} (shard {s.label})"
            )
    return noted


def _check_split(shards: list[Shard]) -> None:
    counts = {s.shard.get("count") for s in shards}
    if len(counts) != 1:
        raise SuiteError(
            "shards of different splits: " + ", ".join(f"{s.path} is {s.label}" for s in shards)
        )
    n = counts.pop()
    splits = {s.shard.get("split") for s in shards}
    if len(splits) != 1:
        raise SuiteError(f"shards split the matrix differently: {', '.join(map(str, splits))}")
    by_index: dict[int, Shard] = {}
    for s in shards:
        k = s.shard.get("index")
        if k in by_index:
            raise SuiteError(
                f"overlapping shards: {by_index[k].path} and {s.path} are both shard {s.label}"
            )
        by_index[k] = s
    missing = [k for k in range(1, n + 1) if k not in by_index]
    if missing:
        raise SuiteError(
            f"shard(s) {', '.join(f'{k}/{n}' for k in missing)} missing: a merged run holds "
            f"every shard of the split ({n})"
        )
    planned = {s.shard.get("planned_cells") for s in shards}
    total = sum(len(s.manifest.get("cells") or []) for s in shards)
    if len(planned) != 1 or planned.pop() != total:
        raise SuiteError(
            f"the shards hold {total} cells, not the {shards[0].shard.get('planned_cells')} "
            "cells of the whole plan"
        )
    ids = [c.get("id") for s in shards for c in s.manifest.get("cells") or []]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise SuiteError(f"cell {dup} is in more than one shard")


def merge_shards(paths: list[Path], out: Path) -> tuple[Path, list[str]]:
    """Check, then write the merged run directory at `out` (a new directory). Returns it and the
    host differences that were listed."""
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise SuiteError(f"--out {out}: already exists; merge writes a new run directory")
    where = out.resolve()
    for p in paths:
        inside = Path(p).resolve()
        if where == inside or inside in where.parents:
            raise SuiteError(
                f"--out {out}: inside the shard {p} ({where}); merge never writes into a shard: "
                "give a place outside every shard"
            )
    shards = sorted((Shard(p) for p in paths), key=lambda s: s.shard.get("index") or 0)
    noted = check_shards(shards)
    noted += [f"shard {s.label}: {line}" for s in shards for line in s.repaired]
    make_owned_dir(out)
    try:
        for sub in (CELLS_DIR, RAW_DIR, SAMPLES_DIR, LOGS_DIR):
            (out / sub).mkdir()
        _copy_shards(shards, out)
        manifest = merged_manifest(shards, out.name, noted)
        rd = RunDir(out)
        rd.write_manifest(manifest)
        rd.rebuild_results()
    except BaseException:
        # Ours, made a moment ago: a half-merged directory must not pass for a run.
        shutil.rmtree(out, ignore_errors=True)
        raise
    return out, noted


def _copy_shards(shards: list[Shard], out: Path) -> None:
    """Cell records, timelines and cell logs keep their names (unique across shards: they name
    the round); the logs of a shard's own steps (its dataset preparation) get the shard's number."""
    for s in shards:
        cells = {c.get("id") for c in s.manifest.get("cells") or []}
        # What each cell observed (raw/) and any rows `report --rederive` derived again
        # (derived/) come along, so the merged run can be derived again like any run.
        for sub in (CELLS_DIR, RAW_DIR, DERIVED_DIR, SAMPLES_DIR):
            for f in sorted((s.path / sub).glob("*")):
                if f.is_file():
                    (out / sub).mkdir(exist_ok=True)
                    shutil.copy2(f, out / sub / f.name)
        for d in sorted((s.path / LOGS_DIR).glob("*")):
            name = (
                d.name
                if d.name.split(".attempt")[0] in cells
                else f"{d.name}.shard{s.label.split('/')[0]}"
            )
            if d.is_dir():
                shutil.copytree(d, out / LOGS_DIR / name, symlinks=True)
            elif d.is_file():
                shutil.copy2(d, out / LOGS_DIR / name)


def merged_manifest(shards: list[Shard], run_id: str, noted: list[str]) -> dict:
    m = copy.deepcopy(shards[0].manifest)
    cells = [c for s in shards for c in s.manifest.get("cells") or []]
    m["run_id"] = run_id
    m["status"] = "finished"
    m["cells"] = sorted(cells, key=lambda c: c.get("index", 0))
    starts = [s.manifest.get("started_at") for s in shards if s.manifest.get("started_at")]
    ends = [s.manifest.get("finished_at") for s in shards if s.manifest.get("finished_at")]
    m["started_at"] = min(starts) if starts else None
    m["finished_at"] = max(ends) if ends else None
    for k in (
        "shard",
        "runner_pid",
        "runner_start_ticks",
        "preflight",
        "resumed_at",
        "stale_work_removed",
    ):
        m.pop(k, None)
    m["merged"] = {
        "merged_at": now_iso(),
        "split": shards[0].shard.get("split"),
        "count": shards[0].shard.get("count"),
        "host_differences": noted,
        "shards": [
            {
                "index": s.shard.get("index"),
                "rounds": s.shard.get("rounds"),
                "run_id": s.run_id,
                "path": str(s.path.resolve()),
                "hostname": s.host.get("hostname"),
                "host": s.host,
                "started_at": s.manifest.get("started_at"),
                "finished_at": s.manifest.get("finished_at"),
                "preflight": s.manifest.get("preflight"),
                "clients": s.manifest.get("clients"),
                "cells": [c.get("id") for c in s.manifest.get("cells") or []],
            }
            for s in shards
        ],
    }
    return m
