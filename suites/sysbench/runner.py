"""Run one sysbench level (or `prepare`) as our child and turn what it recorded into figures.

sysbench runs our wrapper (mallocsweep.lua), which requires the stock workload and appends JSON
records to <log>.jsonl; its human-readable output goes to <log> untouched. We follow the records
while it runs (per-interval callback), and never wait for it unboundedly: a level that hangs
(zero events with --histogram, a server that stopped answering) is killed with its whole process
group at the deadline and reported as failed. A failing level never raises.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from collectors.priority import IdleBoost, boost, unboost
from servers import interrupts
from servers.launch import Child, spawn
from servers.shipped import shipped
from suites.errors import SuiteError
from suites.sysbench.options import (
    SysbenchOptions,
    level_argv,
    prepare_argv,
    stock_script,
    whole_seconds,
)
from suites.sysbench.records import level_result, parse_line, read_records
from suites.sysbench.watch import LevelWatch
from suites.workload import ClientTarget, LevelResult

WRAPPER = shipped("suites.sysbench", "mallocsweep.lua")
THREAD_INIT_TIMEOUT_S = 30  # hard-coded in sysbench 1.0.20: all threads connected, or exit 2
# How often a running level's records are read where the kernel cannot wake us when they are
# written (suites.sysbench.watch): interval reports drive the collectors' window marks.
POLL_S = 0.05
# The longest sleep between two looks while a level runs: the report thread's boost is judged
# (IdleBoost.check) at least this often, even when no record comes.
WAKE_MAX_S = 1.0
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}

# What a DBA should do about the failures a sweep meets, keyed by what sysbench says.
_HINTS = [
    (
        re.compile(r"\b1461\b|max_prepared_stmt_count"),
        'raise the server\'s max_prepared_stmt_count or run with ps_mode = "disable"',
    ),
    (
        re.compile(r"\b1040\b|Too many connections"),
        "raise the server's max_connections above the thread count",
    ),
    (
        re.compile(r"failed to initialize within"),
        "clients could not all connect in sysbench's 30 s: use the unix socket, raise back_log",
    ),
    (
        re.compile(r"\b2002\b|\b2003\b|\b2006\b|\b2013\b|Lost connection|gone away|Can't connect"),
        "the server stopped answering: check its error log",
    ),
    (
        re.compile(r"Too many open files|EMFILE"),
        "raise the open-file limit (ulimit -n) on the client side",
    ),
    (re.compile(r"doesn't exist|1146"), "the dataset is missing: run prepare for these tables"),
]


def records_path(log_path: Path) -> Path:
    """Where the wrapper's JSON records of the level logged at `log_path` are kept."""
    return Path(log_path).with_suffix(".jsonl")


def _boost_report_thread(pid: int, tid) -> IdleBoost | dict:
    """Real-time priority for sysbench's report thread, as that thread named itself.

    Our wrapper's top level runs once in each of sysbench's Lua states; only the report thread's
    state has sysbench.tid = --threads, and there it writes a "report_thread" record with its
    kernel thread id (mallocsweep.lua). Starved among 1536 workers and as many server threads, the
    report thread skipped whole seconds of interval reports on 2 cores, or wrote none at all; it
    does nothing but wake once per interval, so the boost does not change the load. The id must
    be a thread of this sysbench (never a guess), and the boost is guarded: should the thread
    use more than a few % of a CPU, it is withdrawn (collectors.priority.IdleBoost).
    Returns the guard, or a record of why nothing was boosted.
    """
    if not isinstance(tid, int) or isinstance(tid, bool) or tid <= 0 or tid == pid:
        return {"tid": tid, "policy": None, "refused": "not a thread id"}
    if not os.path.isdir(f"/proc/{pid}/task/{tid}"):
        return {"tid": tid, "policy": None, "refused": f"not a thread of sysbench (pid {pid})"}
    guard = IdleBoost(pid, tid)
    guard.start()
    return guard


def _from_intervals(res: LevelResult, recs) -> None:
    """Rates of a level stopped on purpose, over the interval reports it wrote."""
    seconds = sum(float(r.get("time_interval") or 0) for r in recs.intervals)
    events = sum(float(r.get("events", 0)) for r in recs.intervals)
    queries = sum(float(r.get(k, 0)) for r in recs.intervals for k in ("reads", "writes", "other"))
    res.events = int(events)
    res.duration_s = round(seconds, 3)
    res.tps = events / seconds if seconds else 0.0
    res.qps = queries / seconds if seconds else 0.0
    res.errors = int(sum(float(r.get("errors", 0)) for r in recs.intervals))
    res.reconnects = int(sum(float(r.get("reconnects", 0)) for r in recs.intervals))


def default_timeout(threads: int, duration_s: float) -> float:
    """Generous bound on a healthy level: connect (sysbench gives up after 30 s), run, drain."""
    return duration_s + THREAD_INIT_TIMEOUT_S + 30 + threads / 50


def ensure_nofile(needed: int) -> dict:
    """The soft RLIMIT_NOFILE sysbench gets (set in the child by the exec helper, ours untouched):
    one socket per thread, up to the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    out = {"soft_before": soft, "hard": hard, "needed": needed}
    if soft != resource.RLIM_INFINITY and soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
    out["soft"] = soft
    return out


def _failure_reason(log_path: Path, default: str) -> str:
    """The most telling FATAL line sysbench wrote, plus what to do about it."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    fatal = [ln.strip() for ln in lines if "FATAL" in ln]
    pick = next(
        (
            ln
            for ln in fatal
            if re.search(r"error|Can't|failed to initialize", ln, re.I)
            and "function failed" not in ln
        ),
        None,
    )
    pick = pick or (fatal[0] if fatal else None)
    reason = f"{default}: {pick.removeprefix('FATAL: ')}" if pick else default
    for pattern, hint in _HINTS:
        if pick and pattern.search(pick):
            return f"{reason} ({hint})"
    return reason


class _RecordFollower:
    """Reads complete lines appended to the records file since the last call."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.pending = b""

    def new_records(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        data = self.pending + chunk
        *lines, self.pending = data.split(b"\n")
        return [r for r in (parse_line(ln.decode(errors="replace")) for ln in lines) if r]


def _spawn(
    argv: list[str], env: dict, log_path: Path, cwd: Path, nofile: int | None = None
) -> Child:
    with open(log_path, "ab") as log:
        log.write(("# mallocsweep: " + " ".join(argv) + "\n").encode())
    # SIGKILL on our death: a client left running would load the next cell's server.
    return spawn(
        argv,
        env=env,
        cwd=cwd,
        stdout=log_path,
        stderr=log_path,
        death_signal=signal.SIGKILL,
        rlimits={"nofile": nofile} if nofile and nofile != resource.RLIM_INFINITY else None,
    )


def _spawn_remote(ssh_argv: list[str], log_path: Path, rec_path: Path, cwd: Path) -> Child:
    """ssh running a level on the client host: its stdout is the records, its stderr the log."""
    with open(log_path, "ab") as log:
        log.write(("# mallocsweep: " + " ".join(_masked(ssh_argv)) + "\n").encode())
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK")}
    return spawn(
        ssh_argv,
        env=_ENV | env,
        cwd=cwd,
        stdout=rec_path,
        stderr=log_path,
        death_signal=signal.SIGKILL,
    )


def _masked(argv: list[str]) -> list[str]:
    """argv as recorded: a client account's password never reaches the run directory."""
    return [re.sub(r"(--mysql-password=)\S*", r"\1***", a) for a in argv]


def run_level(
    target: ClientTarget,
    workload: str,
    threads: int,
    duration_s: float,
    opts: SysbenchOptions,
    log_path: Path,
    on_interval: Callable[[float, float, float], None] | None = None,
    timeout_s: float | None = None,
    stop_when: Callable[[], bool] | None = None,
    remote=None,
) -> LevelResult:
    """One level: `threads` clients of `workload` for `duration_s` seconds.

    Bad arguments (unknown workload, threads < 1, fractional duration) raise SuiteError; anything
    that goes wrong while running returns a LevelResult with status "failed" and the reason.
    `on_interval(t_s, tps, qps)` is called from this thread once per report interval, within
    POLL_S of sysbench writing it (the collectors mark their measured window there).
    `stop_when()` is asked after each interval report; when it says True, sysbench is stopped
    (SIGTERM to its group) and the result is "ok" with extra["stopped_early"], its figures from
    the interval reports (a warmup that got warm needs no more).
    `remote` (suites.remote.clients.RemoteClients): sysbench runs on that client host over SSH;
    its records come back on ssh's stdout into the same records file.
    """
    script = stock_script(workload)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise SuiteError(f"sysbench threads must be a positive integer, got {threads!r}")
    seconds = whole_seconds(duration_s, "duration_s")
    if seconds < 1:
        raise SuiteError(f"duration_s must be at least 1 second, got {duration_s!r}")
    log_path = Path(log_path).absolute()  # sysbench runs in another cwd
    log_path.parent.mkdir(parents=True, exist_ok=True)
    rec_path = records_path(log_path)
    rec_path.unlink(missing_ok=True)
    rec_path.touch()  # watched from the start; the wrapper appends to it
    argv = level_argv(WRAPPER, target, opts, threads, seconds)
    limit = timeout_s if timeout_s is not None else default_timeout(threads, seconds)
    scratch = Path(tempfile.mkdtemp(prefix="ms-sb-", dir="/tmp"))
    env = _ENV | {
        "HOME": str(scratch),  # no ~/.luarocks module may shadow the stock scripts
        "MALLOCSWEEP_WORKLOAD": script,
        "MALLOCSWEEP_OUT": str(rec_path),
        "MALLOCSWEEP_DONE": str(scratch / "finished"),
        "MALLOCSWEEP_THREADS": str(threads),  # tells the report thread's Lua state apart
    }
    nofile = ensure_nofile(threads + 256)
    follower = _RecordFollower(rec_path)
    timed_out = stopped = False
    child = None
    priority: dict = {}
    report: IdleBoost | dict | None = None  # sysbench's report thread, once it has named itself
    watch: LevelWatch | None = None
    remote_tag = None
    started = time.monotonic()
    try:
        try:
            if remote is not None:
                ssh_argv, remote_tag = remote.level_command(argv, env, limit)
                child = _spawn_remote(ssh_argv, log_path, rec_path, scratch)
            else:
                child = _spawn(argv, env, log_path, scratch, nofile["soft"])
        except OSError as e:
            res = LevelResult(
                workload=workload,
                threads=threads,
                status="failed",
                error=f"cannot run {opts.sysbench}: {e.strerror}",
                raw_log=log_path,
            )
            return res
        deadline = started + limit
        # Reports reach the collectors' window marks through this thread: wake it promptly
        # (children it creates from now on start with the normal policy again). It sleeps in
        # select() between records (watch.py), so it does not take CPU from the server: measured
        # on this 2-core machine (issue 17), one MariaDB life, 8 threads, 10 s levels, FIFO and
        # normal policy interleaved over 6 rounds: QPS FIFO/normal median 1.04 (POINT_SELECT) and
        # 1.13 (OLTP_RO), server CPU 0.72 vs 0.73 and 0.94 vs 0.88 cores.
        priority = {"runner": boost(), "report_thread": None}
        watch = LevelWatch(rec_path, child.pid, POLL_S)
        while True:
            ended = child.poll()
            for rec in follower.new_records():
                if rec["type"] == "report_thread" and report is None and ended is None:
                    report = (
                        {"tid": rec.get("tid"), "policy": None, "refused": "on the client host"}
                        if remote is not None
                        else _boost_report_thread(child.pid, rec.get("tid"))
                    )
                    continue
                if rec["type"] != "interval":
                    continue
                if isinstance(report, IdleBoost) and rec.get("tid") != report.tid:
                    # The hook ran elsewhere: whatever we boosted is not the report thread.
                    report.revoke(f"an interval report came from thread {rec.get('tid')}")
                if on_interval is not None:
                    dt = float(rec.get("time_interval") or 1.0) or 1.0
                    q = sum(float(rec.get(k, 0)) for k in ("reads", "writes", "other"))
                    on_interval(
                        float(rec.get("time_total", 0)), float(rec.get("events", 0)) / dt, q / dt
                    )
                if ended is None and not stopped and stop_when is not None and stop_when():
                    stopped = True
                    child.signal_group(signal.SIGTERM)
            if isinstance(report, IdleBoost):
                report.check()
            if ended is not None:
                break
            # A safe point: on a signal, the finally below kills and reaps sysbench.
            interrupts.check()
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                child.signal_group(signal.SIGKILL)
                child.wait(10)
                break
            watch.wait(min(deadline - now, WAKE_MAX_S))
    finally:
        with interrupts.held(), interrupts.doing("sysbench to be killed and reaped"):
            unboost()
            if watch is not None:
                watch.close()
            if isinstance(report, IdleBoost):
                report.stop()
            ended_badly = child is not None and (
                child.poll() is None or timed_out or stopped or child.exit.returncode != 0
            )
            if child is not None and child.poll() is None:  # interrupted: no clients left behind
                child.signal_group(signal.SIGKILL)
                child.wait(10)
            if remote_tag is not None and (ended_badly or child is None):
                remote.abort(remote_tag)  # on the client host too
            shutil.rmtree(scratch, ignore_errors=True)

    if isinstance(report, IdleBoost):
        priority["report_thread"] = report.to_record()
    elif report is not None:
        priority["report_thread"] = report
    recs = read_records(rec_path)
    res = level_result(workload, threads, recs, log_path)
    exit_info = child.exit
    res.extra.update(
        argv=_masked(argv),
        records=str(rec_path),
        wall_s=round(time.monotonic() - started, 3),
        exit=exit_info.to_manifest() if exit_info else None,
        nofile=nofile,
        priority=priority,
        follow=watch.mode if watch is not None else None,
    )
    if stopped:
        res.extra["stopped_early"] = True
        if recs.cumulative is None:
            # Ours to stop: what the intervals saw is the result (no cumulative report).
            res.status, res.error = "ok", None
            _from_intervals(res, recs)
        return res  # its exit status is our SIGTERM's
    if timed_out:
        seen = (
            "zero events"
            if not any(float(r.get("events", 0)) for r in recs.intervals)
            else (f"{res.events} events before it stalled")
        )
        res.status = "failed"
        res.error = _failure_reason(
            log_path, f"sysbench did not finish within {limit:.0f}s and was killed ({seen})"
        )
    elif exit_info is None or exit_info.returncode != 0:
        how = exit_info.describe if exit_info else "ended in an unknown way"
        res.status = "failed"
        res.error = _failure_reason(log_path, f"sysbench {how}")
    return res


def prepare(
    target: ClientTarget, opts: SysbenchOptions, log_path: Path, timeout_s: float | None = None
) -> float:
    """`sysbench prepare` of opts.tables x opts.table_size rows; returns the seconds it took.

    The database (target.database) must exist. Raises SuiteError naming the log on failure.
    """
    log_path = Path(log_path).absolute()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    threads = max(1, min(opts.tables, os.cpu_count() or 1))
    argv = prepare_argv(target, opts, threads)
    scratch = Path(tempfile.mkdtemp(prefix="ms-sbp-", dir="/tmp"))
    started = time.monotonic()
    child = None
    try:
        try:
            child = _spawn(argv, _ENV | {"HOME": str(scratch)}, log_path, scratch)
        except OSError as e:
            raise SuiteError(f"cannot run {opts.sysbench}: {e.strerror}") from None
        deadline = None if timeout_s is None else started + timeout_s
        while True:
            # Safe points every half second: a signal kills sysbench in the finally below.
            step = 0.5 if deadline is None else min(0.5, max(0.0, deadline - time.monotonic()))
            ended = child.wait(step)
            if ended is not None or (deadline is not None and time.monotonic() >= deadline):
                break
            interrupts.check()
        if ended is None:
            child.signal_group(signal.SIGKILL)
            child.wait(10)
            raise SuiteError(
                f"sysbench prepare did not finish within {timeout_s:.0f}s; see {log_path}"
            )
    finally:
        with interrupts.held():
            if child is not None and child.poll() is None:
                child.signal_group(signal.SIGKILL)
                child.wait(10)
            shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.monotonic() - started
    if ended.returncode != 0:
        reason = _failure_reason(log_path, f"sysbench prepare {ended.describe}")
        raise SuiteError(f"{reason}; see {log_path}")
    return seconds
