"""One level's client processes: started, followed record by record, ended — wherever they run.

Every level whose load comes from client processes that write JSON records runs through
run_streams, whether its clients run here (one local sysbench), on one client host (sysbench or
our Python agent over SSH, its records on ssh's stdout), or split over several client hosts
(one stream per host, started together). "Local" is one host; several hosts are several streams.

A stream is one client process: started by the caller's `start(scratch)` (so its command line,
environment and limits are the workload's), with its records appended to `records`, which the
loop follows. What the loop owns, once for all of them:
- the go-barrier: gated streams (several hosts) each write a "ready" record once logged in and
  wait for a line on their go pipe; when every one is ready, each gets "go" at once (a stream
  that ends or a host that does not get ready in time ends the level, failed);
- the timeline: interval k of every stream, combined by the caller's reader, is handed to
  `on_interval(t_s, tps, qps)` once every stream still running has written it (their window marks
  need one clock: ours); with one stream, each interval as it comes;
- stopping: `stop_when()` asked after each interval (True: SIGTERM to every stream, a warmup that
  got warm), a deadline (SIGKILL, the level failed as timed out), signals at its safe points;
- the end, on every path and with signals held: streams still running killed with their process
  groups, `abort()` run for each that ended badly (a client host kills what it left there),
  scratch removed. A stream's exit, and what it wrote, stay for the caller to judge.
Every record also goes to `on_record(stream, record)` as it is read (sysbench's report thread
naming itself, the agent's result), `on_started()` runs once every stream is running (and got
its go), and `on_tick()` at every wake-up (the report thread's boost guard).
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from servers import interrupts
from servers.launch import Child, ExitInfo, spawn
from servers.scratch import owned_dir

# How often records are looked for where the kernel cannot wake us when they are written
# (several streams, or no inotify/pidfd).
POLL_S = 0.05
# The longest sleep between two looks while a level runs (on_tick runs at least this often).
WAKE_MAX_S = 1.0


# -- sleeping until a record or an exit ---------------------------------------------------------
#
# With one stream, the loop sleeps until its client writes a record or exits: no polling while a
# level runs. The runner used to poll the records file every 50 ms, at real-time priority (it must mark the
# measured window promptly): about 60 wake-ups a second once Child.wait's own sleep ladder is
# counted, each preempting a server or client thread, and 0.7% of a core of runner CPU during an
# 8-thread level here (issue 19). Instead the runner now blocks in select() on two descriptors the
# kernel makes readable exactly when something happens: an inotify watch on the records file
# (IN_MODIFY: the wrapper appended a record, about once a second) and a pidfd of sysbench (it
# exited). Where either is unavailable (no inotify, kernel < 5.3), it falls back to polling.

IN_MODIFY = 0x00000002
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

_libc = ctypes.CDLL(None, use_errno=True)


class LevelWatch:
    """wait(timeout) returns when the records file was written, sysbench exited, or timeout
    passed; it says nothing about which: the caller reads the records and polls the child."""

    def __init__(self, records: Path, pid: int, poll_s: float):
        self.poll_s = poll_s
        self._ino = self._pidfd = -1
        self.mode = "polling"
        try:
            self._pidfd = os.pidfd_open(pid)
            fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                raise OSError(ctypes.get_errno(), "inotify_init1")
            self._ino = fd
            if _libc.inotify_add_watch(fd, os.fsencode(records), IN_MODIFY) < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch")
            self.mode = "inotify+pidfd"
        except (OSError, AttributeError):
            self.close()
            self.mode = "polling"

    def wait(self, timeout_s: float) -> str:
        """Also returns when a signal came (servers.interrupts' wake pipe): the runner acts on it
        at once, not at the next record. Says what ended the wait: "record" (the records file
        was written), "exit" (the child ended), "signal", "timeout", or "poll" (polling mode
        slept one poll interval; the caller looks at the file and the child itself)."""
        wake = interrupts.wake_fd()
        if self.mode == "polling":
            if wake is None:
                time.sleep(min(self.poll_s, max(0.0, timeout_s)))
                return "poll"
            ready, _, _ = select.select([wake], [], [], min(self.poll_s, max(0.0, timeout_s)))
            return "signal" if ready else "poll"
        fds = [self._ino, self._pidfd] + ([wake] if wake is not None else [])
        ready, _, _ = select.select(fds, [], [], max(0.0, timeout_s))
        if self._ino in ready:
            try:
                while os.read(self._ino, 4096):  # drain the events; the file says what is new
                    pass
            except BlockingIOError:
                pass
            return "record"
        if self._pidfd in ready:
            return "exit"
        return "signal" if ready else "timeout"

    def close(self) -> None:
        for fd in (self._ino, self._pidfd):
            if fd >= 0:
                os.close(fd)
        self._ino = self._pidfd = -1


def parse_record(line: str) -> dict | None:
    """One JSON record with a "type", or None (a blank or partial line: a process killed
    mid-write)."""
    line = line.strip()
    if not line:
        return None
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return None
    return rec if isinstance(rec, dict) and "type" in rec else None


class RecordFollower:
    """Reads complete lines appended to a records file since the last call."""

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
        return [r for r in (parse_record(ln.decode(errors="replace")) for ln in lines) if r]


class Intervals(Protocol):
    """How a client's interval records read (sysbench's, or our agent's)."""

    def rates(self, rec: dict) -> tuple[float, float, float]:
        """(t_s since the load started, transactions/s, operations/s) of one interval record."""

    def combine(self, recs: list[dict]) -> dict:
        """Interval k of several streams as one record."""


@dataclass
class Stream:
    """One client process of a level."""

    name: str  # where it runs: "local" or the client host
    start: Callable[[Path, int | None], Child]  # (scratch dir, go fd or None) -> the child
    records: Path  # where its records are appended (followed by the loop)
    abort: Callable[[], None] | None = None  # ends it where it runs, after a bad end
    gated: bool = False  # it waits for a go after writing a "ready" record
    # Filled by the loop.
    child: Child | None = None
    follower: RecordFollower | None = None
    go: int = -1  # the write end of its go pipe (gated)
    intervals: list[dict] = field(default_factory=list)
    ready_at: float | None = None
    start_error: OSError | None = None

    @property
    def ended(self) -> bool:
        return self.child is None or self.child.poll() is not None

    def ended_badly(self, run: LevelRun) -> bool:
        return (
            self.child is None
            or self.child.poll() is None
            or run.timed_out
            or run.stopped
            or self.child.exit.returncode != 0
        )


@dataclass
class LevelRun:
    """What happened to a level's streams (their exits are on each stream's child)."""

    streams: list[Stream]
    started: float
    limit_s: float | None
    go_at: float | None = None  # when the barrier released them (None: never, or no barrier)
    timed_out: bool = False
    stopped: bool = False  # stop_when said so
    follow: str | None = None  # how records were followed (LevelWatch.mode), one stream
    wall_s: float = 0.0

    @property
    def started_all(self) -> bool:
        """Every stream started (and, gated, got its go)."""
        gated = any(s.gated for s in self.streams)
        return all(s.child is not None for s in self.streams) and (
            self.go_at is not None or not gated
        )


def _ready(streams: list[Stream], deadline: float) -> float | None:
    """The barrier: once every gated stream wrote "ready", "go" to each; when that was."""
    while True:
        for s in streams:
            for rec in s.follower.new_records():
                if rec["type"] == "ready" and s.ready_at is None:
                    s.ready_at = time.monotonic()
                elif rec["type"] == "interval":
                    s.intervals.append(rec)
        if all(s.ready_at is not None for s in streams):
            for s in streams:
                os.write(s.go, b"go\n")
            return time.monotonic()
        if any(s.ended for s in streams) or time.monotonic() > deadline:
            return None  # a stream that cannot start: the level ends, failed
        interrupts.check()
        streams[0].child.wait(POLL_S)


def run_streams(
    streams: list[Stream],
    reader: Intervals,
    *,
    limit_s: float | None,
    on_interval: Callable[[float, float, float], None] | None = None,
    stop_when: Callable[[], bool] | None = None,
    on_record: Callable[[Stream, dict], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    on_started: Callable[[], None] | None = None,
    ready_timeout_s: float = 60.0,
    what: str = "the level's clients",
) -> LevelRun:
    """Run `streams` to their end (see the module docstring). Never raises for a client that
    fails (its exit says so), only for an interruption (after ending every stream) or a bug.
    A stream whose start raised OSError has `start_error` set and no child; the level then ends
    at once."""
    run = LevelRun(streams, time.monotonic(), limit_s)
    scratch = owned_dir("ms-lvl-")
    watch: LevelWatch | None = None
    gos: list[int] = []
    try:
        for s in streams:
            s.records.unlink(missing_ok=True)
            s.records.touch()  # watched from the start; the client appends to it
            s.follower = RecordFollower(s.records)
            r = None
            if s.gated:
                r, s.go = os.pipe()
                gos.append(s.go)
            try:
                s.child = s.start(scratch, r)
            except OSError as e:
                s.start_error = e
                return run
            finally:
                if r is not None:
                    os.close(r)
        if gos:
            run.go_at = _ready(streams, time.monotonic() + ready_timeout_s)
            for fd in gos:
                os.close(fd)
            gos = []
            if run.go_at is None:
                return run
        if on_started is not None:
            on_started()
        deadline = None if limit_s is None else time.monotonic() + limit_s
        if len(streams) == 1:
            watch = LevelWatch(streams[0].records, streams[0].child.pid, POLL_S)
            run.follow = watch.mode
        told = 0  # combined intervals handed on
        while True:
            ended = [s.ended for s in streams]
            for s in streams:
                for rec in s.follower.new_records():
                    if rec["type"] == "interval":
                        s.intervals.append(rec)
                    if on_record is not None:
                        on_record(s, rec)
            # Interval k is complete once every stream still running has written it.
            live = [s.intervals for s, e in zip(streams, ended, strict=True) if not e]
            complete = min(len(i) for i in (live or [s.intervals for s in streams]))
            while told < complete:
                recs = [s.intervals[told] for s in streams if len(s.intervals) > told]
                rec = recs[0] if len(streams) == 1 else reader.combine(recs)
                told += 1
                if on_interval is not None:
                    on_interval(*reader.rates(rec))
                if not any(ended) and not run.stopped and stop_when is not None and stop_when():
                    run.stopped = True
                    for s in streams:
                        s.child.signal_group(signal.SIGTERM)  # sysbench reports and exits
            if on_tick is not None:
                on_tick()
            if all(ended):
                break
            interrupts.check()  # a safe point: the finally below ends every stream
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                run.timed_out = True
                break
            wait = WAKE_MAX_S if deadline is None else min(deadline - now, WAKE_MAX_S)
            if watch is not None:
                watch.wait(wait)
            else:
                streams[ended.index(False)].child.wait(min(wait, POLL_S))
    finally:
        with interrupts.held(), interrupts.doing(f"{what} to be ended"):
            for fd in gos:
                os.close(fd)
            if watch is not None:
                watch.close()
            for s in streams:
                bad = s.ended_badly(run)
                if s.child is not None and s.child.poll() is None:
                    s.child.signal_group(signal.SIGKILL)  # no client left to load the next cell
                    s.child.wait(10)
                if bad and s.abort is not None:
                    s.abort()
            shutil.rmtree(scratch, ignore_errors=True)
            run.wall_s = round(time.monotonic() - run.started, 3)
    return run


def run_to_end(
    argv: list[str],
    env: dict[str, str],
    log: Path,
    cwd: Path,
    timeout_s: float | None = None,
    what: str = "the client",
    root=None,
) -> tuple[ExitInfo | None, float]:
    """Run one client program to its end (a prepare, a dump, a loader): our child, killed with
    us and at `timeout_s`, its output appended to `log`. Returns (its exit, or None when it was
    killed at the deadline; seconds it ran). OSError when it cannot start; a signal kills it at
    once (Interrupted, at a safe point every half second). `root` (servers.root.RootLaunch): the
    program is one of a server root's, run there (argv[0] and cwd as seen inside it)."""
    started = time.monotonic()
    child = spawn(
        argv, env=env, cwd=cwd, stdout=log, stderr=log, death_signal=signal.SIGKILL, root=root
    )
    try:
        deadline = None if timeout_s is None else started + timeout_s
        while True:
            step = 0.5 if deadline is None else min(0.5, max(0.0, deadline - time.monotonic()))
            ended = child.wait(step)
            if ended is not None or (deadline is not None and time.monotonic() >= deadline):
                break
            interrupts.check()
    finally:
        with interrupts.held(), interrupts.doing(f"{what} to be killed and reaped"):
            if child.poll() is None:
                child.signal_group(signal.SIGKILL)
                child.wait(10)
    return ended, time.monotonic() - started
