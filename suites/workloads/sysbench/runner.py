"""Run one sysbench level (or `prepare`) as our child — here, on a client host, or split over
several — and turn what it recorded into figures.

sysbench runs our wrapper (mallocsweep.lua), which loads the workload's script (a stock one of
sysbench's, or the user's own) unchanged and appends JSON records to <log>.jsonl; its
human-readable output goes to <log> untouched. The level's client processes are followed by the
one level loop (suites.workloads.level_loop): one stream here or on one client host, one per host when the
threads are split over several (suites.workloads.sysbench.split combines their figures). We never wait for
a level unboundedly: one that hangs (zero events with --histogram, a server that stopped
answering) is killed with its whole process group at the deadline and reported as failed. A
failing level never raises.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

from collectors.priority import IdleBoost, boost, unboost
from rundir.records import ClientLoad, SysbenchLevel
from servers import interrupts
from servers.launch import Child, spawn
from servers.scratch import owned_dir
from servers.shipped import shipped
from suites.errors import SuiteError
from suites.remote.hosts import combine_loads, split_threads
from suites.remote.spawn import masked, spawn_over_ssh
from suites.workloads.level_loop import Stream, run_streams, run_to_end
from suites.workloads.level_result import ClientTarget, LevelResult
from suites.workloads.sysbench.options import (
    Script,
    SysbenchOptions,
    as_script,
    level_argv,
    prepare_argv,
    whole_seconds,
)
from suites.workloads.sysbench.records import level_result, read_records, records_path
from suites.workloads.sysbench.settle import SettleWatch
from suites.workloads.sysbench.split import SysbenchIntervals, host_log, split_result

WRAPPER = shipped("suites.workloads.sysbench", "mallocsweep.lua")
THREAD_INIT_TIMEOUT_S = 30  # hard-coded in sysbench 1.0.20: all threads connected, or exit 2
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


def failure_reason(log_path: Path, default: str) -> str:
    """The most telling FATAL line sysbench wrote, plus what to do about it."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    # sysbench says why as FATAL lines; an option the script does not take, on a line of its own
    fatal = [ln.strip() for ln in lines if "FATAL" in ln or ln.startswith("invalid option")]
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


def spawn_local(
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


def _local_stream(argv, env, log_path: Path, rec_path: Path, nofile: int) -> Stream:
    def start(scratch: Path, _go) -> Child:
        # HOME: no ~/.luarocks module may shadow the stock scripts
        full = env | {"HOME": str(scratch), "MALLOCSWEEP_OUT": str(rec_path),
                      "MALLOCSWEEP_DONE": str(scratch / "finished")}  # fmt: skip
        return spawn_local(argv, full, log_path, scratch, nofile)

    return Stream("local", start, rec_path)


def _host_stream(host, argv, env, limit, log_path: Path, rec_path: Path, gated: bool) -> Stream:
    """sysbench on a client host (suites.remote.clients): its records come back on ssh's stdout
    into `rec_path`, its output on ssh's stderr into the log; ended there by abort()."""
    ssh_argv, tag = host.level_command(argv, env, limit, barrier=gated)

    def start(scratch: Path, go) -> Child:
        return spawn_over_ssh(ssh_argv, log_path, rec_path, scratch, go_fd=go)

    return Stream(host.target, start, rec_path, abort=lambda: host.abort(tag), gated=gated)


class _ReportThread:
    """sysbench's report thread, once it has named itself (a local level only): its boost and
    the guard that withdraws it (see _boost_report_thread)."""

    def __init__(self, remote: bool):
        self.remote = remote
        self.report: IdleBoost | dict | None = None

    def record(self, stream: Stream, rec: dict) -> None:
        if rec["type"] == "interval" and isinstance(self.report, IdleBoost):
            if rec.get("tid") != self.report.tid:
                # The hook ran elsewhere: whatever we boosted is not the report thread.
                self.report.revoke(f"an interval report came from thread {rec.get('tid')}")
            return
        if rec["type"] != "report_thread" or self.report is not None or stream.ended:
            return
        if self.remote:
            self.report = {"tid": rec.get("tid"), "policy": None, "refused": "on the client host"}
        else:
            self.report = _boost_report_thread(stream.child.pid, rec.get("tid"))

    def tick(self) -> None:
        if isinstance(self.report, IdleBoost):
            self.report.check()

    def stop(self) -> dict | None:
        if isinstance(self.report, IdleBoost):
            self.report.stop()
            return self.report.to_record()
        return self.report


def run_level(
    target: ClientTarget,
    workload: str | Script,
    threads: int,
    duration_s: float,
    opts: SysbenchOptions,
    log_path: Path,
    on_interval: Callable[[float, float, float], None] | None = None,
    timeout_s: float | None = None,
    stop_when: Callable[[], bool] | None = None,
    clients=None,
    settle_cap_s: float = 0,
) -> LevelResult:
    """One level: `threads` clients of `workload` (a stock workload's name, or a Script) for
    `duration_s` seconds.

    Bad arguments (unknown workload, threads < 1, fractional duration) raise SuiteError; anything
    that goes wrong while running returns a LevelResult with status "failed" and the reason.
    `on_interval(t_s, tps, qps)` is called from this thread once per report interval, as soon as
    sysbench wrote it (the collectors mark their measured window there).
    `stop_when()` is asked after each interval report; when it says True, sysbench is stopped
    (SIGTERM to its group) and the result is "ok" with sysbench.stopped_early, its figures from
    the interval reports (a warmup that got warm needs no more).
    `clients` (suites.remote.clients.RemoteClients or suites.remote.hosts.ClientHosts): sysbench
    runs on that client host over SSH, or split over those hosts, started together; the level's
    client_load is their own CPU, context switches and network over it.
    `settle_cap_s` > 0 (a local level only): sysbench is planned for duration_s + settle_cap_s
    and ended by our wrapper once duration_s seconds followed the level's ramp (settle.py).
    """
    script = as_script(workload)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise SuiteError(f"sysbench threads must be a positive integer, got {threads!r}")
    seconds = whole_seconds(duration_s, "duration_s")
    if seconds < 1:
        raise SuiteError(f"duration_s must be at least 1 second, got {duration_s!r}")
    log_path = Path(log_path).absolute()  # sysbench runs in another cwd
    log_path.parent.mkdir(parents=True, exist_ok=True)
    hosts = list(clients.hosts) if clients is not None else []
    if len(hosts) > 1:
        return _split_level(target, script, threads, seconds, opts, log_path, hosts, on_interval)
    watch = None
    env = _ENV | script.environment()
    if settle_cap_s and not hosts:
        # Until the ramp has ended, at most settle_cap_s more (the stop file is this level's own,
        # beside its log in the cell's directory).
        watch = SettleWatch(seconds, log_path.with_suffix(".stop"))
        watch.stop_path.unlink(missing_ok=True)
        seconds += whole_seconds(settle_cap_s, "settle_cap_s")
        env = env | {"MALLOCSWEEP_STOP": str(watch.stop_path)}
        on_interval = _watched(watch, on_interval)
    argv = level_argv(WRAPPER, target, opts, threads, seconds, script)
    limit = timeout_s if timeout_s is not None else default_timeout(threads, seconds)
    # MALLOCSWEEP_THREADS tells the report thread's Lua state apart
    env = env | {"MALLOCSWEEP_THREADS": str(threads)}
    nofile = ensure_nofile(threads + 256)
    rec_path = records_path(log_path)
    host = hosts[0] if hosts else None
    stream = (
        _host_stream(host, argv, env, limit, log_path, rec_path, gated=False)
        if host is not None
        else _local_stream(argv, env, log_path, rec_path, nofile["soft"])
    )
    before = host.load() if host is not None else None
    report = _ReportThread(remote=host is not None)
    priority: dict = {}

    def started() -> None:
        # Reports reach the collectors' window marks through this thread: wake it promptly
        # (children it creates from now on start with the normal policy again). It sleeps in
        # select() between records (suites.workloads.level_loop.LevelWatch), so it does not take CPU
        # from the server: measured on this 2-core machine (issue 17), one MariaDB life, 8
        # threads, 10 s levels, FIFO and normal policy interleaved over 6 rounds: QPS
        # FIFO/normal median 1.04 (POINT_SELECT) and 1.13 (OLTP_RO), server CPU 0.72 vs 0.73
        # and 0.94 vs 0.88 cores.
        priority.update(runner=boost(), report_thread=None)

    try:
        run = run_streams(
            [stream],
            SysbenchIntervals(),
            limit_s=limit,
            on_interval=on_interval,
            stop_when=stop_when,
            on_record=report.record,
            on_tick=report.tick,
            on_started=started,
            what="sysbench",
        )
    finally:
        with interrupts.held():
            unboost()
            priority["report_thread"] = report.stop()
    if stream.start_error is not None:
        return LevelResult(
            workload=script.name,
            threads=threads,
            status="failed",
            error=f"cannot run {opts.sysbench}: {stream.start_error.strerror}",
            raw_log=log_path,
        )
    recs = read_records(rec_path)
    res = level_result(script.name, threads, recs, log_path)
    exit_info = stream.child.exit
    rec: SysbenchLevel = res.sysbench
    rec.argv = masked(argv)
    rec.records = str(rec_path)
    rec.wall_s = run.wall_s
    rec.exit = exit_info.to_manifest() if exit_info else None
    rec.nofile = nofile
    rec.priority = priority or None
    rec.follow = run.follow
    if host is not None:
        # the client host's own CPU, context switches and network over the level
        res.client_load = ClientLoad(**host.level_load(before))
    if run.stopped:
        rec.stopped_early = True
        if recs.cumulative is None:
            # Ours to stop: what the intervals saw is the result (no cumulative report).
            res.status, res.error = "ok", None
            _from_intervals(res, recs)
        return res  # its exit status is our SIGTERM's
    if run.timed_out:
        seen = (
            "zero events"
            if not any(float(r.get("events", 0)) for r in recs.intervals)
            else (f"{res.events} events before it stalled")
        )
        res.status = "failed"
        res.error = failure_reason(
            log_path, f"sysbench did not finish within {limit:.0f}s and was killed ({seen})"
        )
    elif exit_info is None or exit_info.returncode != 0:
        how = exit_info.describe if exit_info else "ended in an unknown way"
        res.status = "failed"
        res.error = failure_reason(log_path, f"sysbench {how}")
    return res


def _watched(watch: SettleWatch, on_interval):
    """on_interval that first shows each report to the settle watch."""

    def seen(t_s: float, tps: float, qps: float) -> None:
        watch.add(t_s, qps)
        if on_interval is not None:
            on_interval(t_s, tps, qps)

    return seen


def _split_level(
    target: ClientTarget, script: Script, threads: int, seconds: int, opts: SysbenchOptions,
    log_path: Path, hosts: list, on_interval,
) -> LevelResult:  # fmt: skip
    """One level over several client hosts: each runs its share of the threads, all started by
    one go once every host is ready (suites.workloads.level_loop), into its own log and records file
    (suites.workloads.sysbench.split.host_log); the level's figures are combined from their records."""
    shares = split_threads(threads, len(hosts))
    names = [h.target for h in hosts]
    logs = [host_log(log_path, n) for n in names]
    limit = default_timeout(max(shares), seconds)
    with open(log_path, "a") as f:
        f.write(
            f"# mallocsweep: {threads} threads split over {len(names)} client hosts, started "
            "together (each waits for one go):\n"
            + "".join(
                f"#   {n}: {s} threads, log {lg.name}\n"
                for n, s, lg in zip(names, shares, logs, strict=True)
            )  # fmt: skip
        )
    argvs = [level_argv(WRAPPER, target, opts, share, seconds, script) for share in shares]
    streams = [
        _host_stream(
            h, argv, _ENV | script.environment() | {"MALLOCSWEEP_THREADS": str(share)}, limit,
            log, records_path(log), gated=True,
        )
        for h, argv, share, log in zip(hosts, argvs, shares, logs, strict=True)
    ]  # fmt: skip
    before = [h.load() for h in hosts]
    run = run_streams(
        streams,
        SysbenchIntervals(),
        limit_s=limit,
        on_interval=on_interval,
        ready_timeout_s=hosts[0].section.connect_timeout_s + THREAD_INIT_TIMEOUT_S,
        what="sysbench on the client hosts",
    )
    if any(s.start_error is not None for s in streams):
        bad = next(s for s in streams if s.start_error is not None)
        raise SuiteError(f"cannot run ssh for client host {bad.name}: {bad.start_error}")
    parts = []
    recs = [read_records(records_path(lg)) for lg in logs]
    for stream, rec, log, share in zip(streams, recs, logs, shares, strict=True):
        part = level_result(script.name, share, rec, log)
        exit_info = stream.child.exit
        if run.go_at is None and part.status == "ok":
            part.status, part.error = "failed", "not every client host got ready to start"
        elif run.timed_out and part.status == "ok":
            part.status, part.error = "failed", f"did not finish within {limit:.0f}s"
        elif part.status == "ok" and (exit_info is None or exit_info.returncode != 0):
            how = exit_info.describe if exit_info else "ended in an unknown way"
            part.status, part.error = "failed", failure_reason(log, f"sysbench {how}")
        elif part.status != "ok":
            part.error = failure_reason(log, part.error or "failed")
        parts.append(part)
    res = split_result(script.name, threads, hosts, shares, streams, recs, parts, logs, log_path,
                       run)  # fmt: skip
    res.sysbench.argv = masked(argvs[0])
    # summed in the client_* columns, each host's kept in the level's record
    each = [h.level_load(b) for h, b in zip(hosts, before, strict=True)]
    res.client_load = ClientLoad(**combine_loads(each, [h.facts["cpus"] for h in hosts]))
    for host_rec, load in zip(res.sysbench.client_hosts, each, strict=True):
        host_rec["load"] = load
    return res


def prepare(
    target: ClientTarget,
    opts: SysbenchOptions,
    log_path: Path,
    timeout_s: float | None = None,
    workload: str | Script | None = None,
    command: str = "prepare",
) -> float:
    """`sysbench prepare` of the stock scripts' opts.tables x opts.table_size rows, or a user's
    script's own `prepare` (or `cleanup`: `command`); returns the seconds it took.

    The database (target.database) must exist. Raises SuiteError naming the log on failure.
    """
    script = None if workload is None else as_script(workload)
    log_path = Path(log_path).absolute()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    threads = max(1, min(opts.tables, os.cpu_count() or 1))
    argv = prepare_argv(target, opts, threads, script, WRAPPER, command)
    scratch = owned_dir("ms-sbp-")
    env = _ENV | {"HOME": str(scratch)}
    if script is not None and not script.stock:
        # through our wrapper: it finds the script's own modules; its records go nowhere
        env |= script.environment() | {
            "MALLOCSWEEP_OUT": str(scratch / "records.jsonl"),
            "MALLOCSWEEP_DONE": str(scratch / "finished"),
        }
    try:
        with open(log_path, "ab") as log:
            log.write(("# mallocsweep: " + " ".join(masked(argv)) + "\n").encode())
        try:
            ended, seconds = run_to_end(argv, env, log_path, scratch, timeout_s, "sysbench")
        except OSError as e:
            raise SuiteError(f"cannot run {opts.sysbench}: {e.strerror}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if ended is None:
        raise SuiteError(
            f"sysbench {command} did not finish within {timeout_s:.0f}s; see {log_path}"
        )
    if ended.returncode != 0:
        reason = failure_reason(log_path, f"sysbench {command} {ended.describe}")
        raise SuiteError(f"{reason}; see {log_path}")
    return seconds
