"""`--resume RUN_DIR`: what may be resumed, which cells, and with which allocators.

A resumed run must measure what the interrupted one would have: same suite, same machine, same
server, same allocator builds. Each difference is a one-line refusal. The cells come from the
manifest (never re-planned from today's "all"), and a runner killed with SIGKILL leaves its cells'
work directories behind: they are removed here, but only when no server of the run still runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rundir.errors import RunDirError
from rundir.format import FORMAT_VERSION
from rundir.integrity import Integrity, check_run
from rundir.write import WORK_DIR, RunDir, owned
from suites.errors import SuiteError
from suites.runner.leftovers import live_servers, runner_running
from suites.runner.plan import CellPlan
from suites.suite.model import suite_from_dict

# Host facts that change allocator behaviour (collectors.host.host_metadata's keys).
HOST_KEYS = ("kernel", "cpu_model", "cpu_count", "glibc_version")
# Differing settings named in full in the refusal; the rest by name only
SHOWN_SETTINGS = 3


def check_run_dir(path: Path) -> Integrity:
    """The run directory to resume, checked before anything else looks at it (rundir.integrity):
    a manifest of the wrong shape is "not a mallocsweep run", a finished cell whose record is
    missing or damaged is named. SuiteError (one line) else."""
    try:
        found = check_run(Path(path))
    except RunDirError as e:
        raise SuiteError(f"--resume {e}") from None
    if found.gaps:
        raise SuiteError(
            "--resume "
            + found.refusal(
                "a resumed run keeps its finished cells, so each needs its record; "
                "nothing was changed (start a new run)"
            )
        )
    return found


def _identity(d: dict) -> dict:
    """The suite settings that decide what runs (where the run is written does not)."""
    return {k: v for k, v in d.items() if k != "run"} | {"repeat": d.get("run", {}).get("repeat")}


def _flat(d: dict, prefix: str = "") -> dict:
    """A suite's settings as "section.key" -> value, so a difference can be named."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def with_defaults(settings: dict) -> dict:
    """A suite's settings (a run's recorded suite, or today's) as "section.key" -> value, with
    each setting a later mallocsweep added (absent, or None) read as its default today: a run
    recorded before the setting existed was measured with what that default does
    (fragmentation.soak absent is no soak, as 0.0 is today), so it still resumes. A value that is
    there is never replaced. Settings today's model no longer reads stay as they are (the
    comparison then names what differs)."""
    was = _flat(_identity(settings))
    try:
        today = _flat(_identity(suite_from_dict(settings, "the run's suite").as_dict()))
    except SuiteError:
        return was
    return {**was, **{k: v for k, v in today.items() if was.get(k) is None}}


def _settings_text(differ: list[str], was: dict, now: dict, recorded: dict) -> str:
    """The differing settings, each with both values (a default the run did not record said as
    such), the ones past SHOWN_SETTINGS by name."""

    def has(k: str) -> str:
        if recorded.get(k) is None and was.get(k) is not None:
            return f"recorded none (read as today's default {was[k]!r})"
        return f"has {was.get(k)!r}"

    shown = "; ".join(f"{k} is {now.get(k)!r}, the run {has(k)}" for k in differ[:SHOWN_SETTINGS])
    rest = differ[SHOWN_SETTINGS:]
    return shown + (f" (and {len(rest)} more: {', '.join(rest)})" if rest else "")


def check_resumable(manifest: dict, suite: dict, label: str | list[str], host: dict) -> None:
    """Refuse (SuiteError, one line) a run that cannot continue as it was started."""
    m = manifest
    if m.get("format_version") != FORMAT_VERSION:
        raise SuiteError(
            f"--resume: run format {m.get('format_version')} is not {FORMAT_VERSION}; resume it with"
            " the mallocsweep version that started it"
        )
    recorded = m.get("suite") or {}
    was_suite, now_suite = with_defaults(recorded), with_defaults(suite)
    differ = sorted(
        k for k in set(was_suite) | set(now_suite) if was_suite.get(k) != now_suite.get(k)
    )
    if differ:
        raise SuiteError(
            "--resume: the suite settings differ from the run's: "
            f"{_settings_text(differ, was_suite, now_suite, _flat(_identity(recorded)))} (same "
            "file and options needed)"
        )
    was = m.get("host") or {}
    for key in HOST_KEYS:
        if was.get(key) != host.get(key):
            raise SuiteError(
                f"--resume: host {key} changed ({was.get(key)!r} -> {host.get(key)!r})"
            )
    # Every cell carries its server's label (a run with several servers: NAME:LABEL each).
    labels = {(c.get("server") or {}).get("label") for c in m["cells"]} - {None}
    now = [label] if isinstance(label, str) else list(label)

    def known(x: str) -> bool:
        # A non-InnoDB engine's cells carry "LABEL+ENGINE" (suites.runner.plan.engine_label).
        return any(x == n or x.startswith(n + "+") for n in now)

    gone = sorted(x for x in labels if not known(x))
    if gone:
        raise SuiteError(
            f"--resume: the server is now {', '.join(now)}, the run used {', '.join(sorted(labels))}"
        )
    pid = runner_running(m) if m.get("status") == "running" else None
    if pid is not None:
        raise SuiteError(f"--resume: the run is still in progress (runner pid {pid})")


def plan_from_manifest(manifest: dict, label: str) -> list[CellPlan]:
    """The run's cells, as it planned them. A cell that ran records the server itself rather than
    its label: it is `label` (checked by check_resumable, and by the cell id, which names it)."""
    plans = []
    for c in manifest.get("cells") or []:
        try:
            p = CellPlan(
                int(c["index"]),
                int(c["round"]),
                str((c.get("server") or {}).get("label") or label),
                str(c["allocator"]["name"]),
                str(c["thp"]["requested"]),
                str(c.get("engine") or "innodb"),  # runs before engines existed were InnoDB
                str((c.get("server") or {}).get("name") or ""),  # a run with several servers
                int((c.get("soak") or {}).get("segment") or 1),  # a soak's resumed segment
            )
        except (KeyError, TypeError, ValueError):
            raise SuiteError(f"--resume: manifest cell {c.get('id')!r} is incomplete") from None
        if p.id != c.get("id"):
            raise SuiteError(f"--resume: manifest cell {c.get('id')!r} does not match its fields")
        plans.append(p)
    return plans


def recorded_allocator(manifest: dict, name: str, server: str = "") -> dict | None:
    """The allocator build the run used (on `server`, in a run with several: each server's root
    has its own builds): its list of allocators, else any cell that ran it."""
    for a in manifest.get("allocators") or []:
        if a.get("name") == name and (a.get("server") or "") == server:
            return a
    for c in manifest.get("cells") or []:
        a = c.get("allocator") or {}
        on = (c.get("server") or {}).get("name") or ""
        if a.get("name") == name and on == server and "sha256" in a:
            return a
    return None


def _same(key: str, value):
    """A digest's case says nothing (the same bytes, printed upper case by another tool)."""
    return value.lower() if key == "sha256" and isinstance(value, str) else value


def check_server_build(manifest: dict, label: str, sha256: str | None) -> None:
    """The server binary still to run is the build the run's finished cells ran (its sha256, where
    the run recorded one): a resumed run of another build would pair two builds' lives."""
    if not sha256:
        return
    for c in manifest.get("cells") or []:
        srv = c.get("server") if isinstance(c.get("server"), dict) else {}
        was = srv.get("sha256")
        if srv.get("label") == label and isinstance(was, str) and was.lower() != sha256.lower():
            raise SuiteError(
                f"--resume: server {label} binary changed (sha256 {was} -> {sha256}, "
                f"{srv.get('binary')}); start a new run"
            )


def check_allocators(manifest: dict, allocators: list, server: str = "") -> None:
    """Each allocator still to run must be usable and the very build the run started with."""
    for a in allocators:
        if not a.usable:
            raise SuiteError(f"--resume: allocator {a.name!r} is no longer usable: {a.why_not}")
        was = recorded_allocator(manifest, a.name, server)
        if was is None:
            continue  # nothing recorded to compare with (no cell of it ever started)
        for key in ("version", "sha256"):
            if _same(key, was.get(key)) != _same(key, getattr(a, key)):
                raise SuiteError(
                    f"--resume: allocator {a.name!r} {key} changed "
                    f"({was.get(key)!r} -> {getattr(a, key)!r}); start a new run"
                )


def clear_stale_work(rd: RunDir, cells: list[CellPlan]) -> list[str]:
    """Remove the work directories a killed runner left, after proving no server uses them.

    Only work/<cell id> of this run's cells, and only when work/ carries our ownership marker.
    Returns the names removed.
    """
    live = live_servers(rd.path)
    if live:
        s = live[0]
        raise SuiteError(
            f"--resume: {s.comm} pid {s.pid} of this run is still running in {s.work_dir}; "
            f"wait for it to exit or stop it (kill {s.pid})"
        )
    work = rd.path / WORK_DIR
    if not owned(work):
        return []
    removed = []
    for c in cells:
        d = work / c.id
        if d.is_dir() and not d.is_symlink():
            try:
                shutil.rmtree(d)
            except OSError as e:
                raise SuiteError(f"--resume: cannot remove the stale {d}: {e.strerror}") from None
            removed.append(c.id)
    return removed
