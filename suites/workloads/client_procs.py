"""Load-generating client processes of ours (iibench, read-while-writing): how they start, what
they share, how they report, how they stop. One module for both workloads.

Each client is `msexec ... python -m suites.workloads.client_procs <the workload's client module> ...`
(this module as __main__ imports the workload's module and runs its `client_main(link)`; running
the workload's module itself as __main__ would import it twice, since its package imports it),
started like every other
child of the runner (servers.launch.spawn): subprocess's C fork/exec runs the exec helper, which
sets the parent-death signal (SIGKILL: a client dies with the runner, even a SIGKILLed one) and
checks the runner is still there, in the client's own process group (a terminal's Ctrl-C reaches
only the runner, which stops the clients itself); no Python runs between fork and exec. A fresh
interpreter per client, so N clients use N cores' worth of Python instead of one GIL.

What a client gets, as file descriptors kept open across exec (their numbers on its command line):
- the board: a small shared-memory file (memfd) that the runner and every client map: the go and
  stop flags, t0 (time.monotonic() at go; CLOCK_MONOTONIC is system-wide), a counter that clients
  claim ranges of under a record lock (iibench's primary keys), and one int64 slot per counter the
  workload asks for (written only by its owner, read by the runner for interval rates: no message
  per operation);
- the work: a memfd holding the workload's JSON work description (the target with its password
  stays off the command line, which any user can read in /proc);
- go and stop: read ends of two pipes whose write ends only the runner holds. Closing one wakes
  every waiting client at once (EOF); the board's flag is the truth (a runner that died also
  closes them: a client that sees EOF without the flag returns, and the death signal follows);
- its result pipe: JSON lines "ready", then "done" (its figures) or "failed" (one line saying why).
  EOF on it before "done" means the client died: its exit status (wait4) says how.

The same machinery runs clients as threads of the runner (ClientSet(..., threads=True)): the
single-process baseline `make bench` compares against, not a mode for measurements.

Client CPU: each client takes getrusage(RUSAGE_SELF) (RUSAGE_THREAD as a thread) around its load
loop, so its figure is the CPU of exactly the load; the runner also keeps each process's
whole-life rusage from wait4 (start-up and disconnect included) as `life_cpu_s`.
"""

from __future__ import annotations

import base64
import fcntl
import importlib
import json
import mmap
import os
import resource
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from servers import interrupts
from servers.errors import ServerError
from servers.launch import Child, spawn

# The board's header, in int64 words; the workload's slots follow.
_GO, _STOP, _T0, _CLAIM = 0, 1, 2, 3
_HEADER = 4
# Where this package's root is: a client's `python -m suites....` imports the same code as ours.
_ROOT = str(Path(__file__).resolve().parents[2])
# A client process that exited is given this long to be reaped after its pipe's EOF.
_REAP_S = 5.0


class Board:
    """The shared-memory board (see the module doc). Created by the runner, mapped by clients."""

    def __init__(self, fd: int, slots: int):
        self.fd = fd
        self._mm = mmap.mmap(fd, 8 * (_HEADER + slots))
        self._q = memoryview(self._mm).cast("q")
        self._d = memoryview(self._mm).cast("d")
        self.slots = self._q[_HEADER:]
        # Record locks exclude processes, not threads of one process: the thread baseline needs
        # a lock of its own (cheap when uncontended, as in a client process). A record lock, not
        # a token in a pipe (measured 2.0-2.5 us per claim against 2.6-3.5 us here, alone): the
        # kernel releases it when its holder dies, and a client killed mid-claim must not leave
        # the others waiting. At 100-row batches either is ~0.03 us per row, against ~1.5 us of
        # client CPU per row.
        self._tlock = threading.Lock()

    @classmethod
    def create(cls, slots: int) -> Board:
        fd = os.memfd_create("mallocsweep-board", os.MFD_CLOEXEC)
        os.ftruncate(fd, 8 * (_HEADER + slots))
        return cls(fd, slots)

    @property
    def go(self) -> bool:
        return self._q[_GO] == 1

    @property
    def stop(self) -> bool:
        return self._q[_STOP] == 1

    @property
    def t0(self) -> float:
        return self._d[_T0]

    def set_go(self, t0: float) -> None:
        self._d[_T0] = t0
        self._q[_GO] = 1

    def set_stop(self) -> None:
        self._q[_STOP] = 1

    def claim(self, want: int, limit: int) -> tuple[int, int]:
        """Take up to `want` of the counter's next values below `limit`: (first, how many)."""
        with self._tlock:
            fcntl.lockf(self.fd, fcntl.LOCK_EX, 8, 8 * _CLAIM)
            try:
                first = self._q[_CLAIM]
                n = max(0, min(want, limit - first))
                self._q[_CLAIM] = first + n
            finally:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 8, 8 * _CLAIM)
        return first, n

    def close(self) -> None:
        for view in (self.slots, self._q, self._d):
            view.release()
        self._mm.close()
        os.close(self.fd)


def _readable(fds: Sequence[int], timeout: float | None) -> list[int]:
    """Which of `fds` are readable (data or EOF) within `timeout` seconds (None: no limit).
    poll, not select: a level of thousands of clients has descriptors above select's 1024."""
    p = select.poll()
    for fd in fds:
        p.register(fd, select.POLLIN)
    ms = None if timeout is None else max(0, int(timeout * 1000))
    return [fd for fd, _ in p.poll(ms)]


def _encode(figures: dict) -> dict:
    """bytes (encoded latency histograms) travel as base64 text in the JSON line."""
    out, raw = {}, []
    for k, v in figures.items():
        if isinstance(v, bytes):
            out[k] = base64.b64encode(v).decode("ascii")
            raw.append(k)
        else:
            out[k] = v
    return {"figures": out, "bytes": raw}


def _decode(msg: dict) -> dict:
    figures = dict(msg.get("figures") or {})
    for k in msg.get("bytes", []):
        figures[k] = base64.b64decode(figures[k])
    return figures


class Link:
    """A client's side: its role, its work, the board, the go/stop waits and its result pipe."""

    def __init__(
        self,
        role: str,
        number: int,
        work: dict,
        board: Board,
        go_fd: int,
        stop_fd: int,
        result_fd: int,
        own_process: bool,
    ):
        self.role, self.number, self.work = role, number, work
        self.board = board
        self._go_fd, self._stop_fd, self._result_fd = go_fd, stop_fd, result_fd
        self.own_process = own_process

    # -- messages (one JSON line each; a write to a pipe never interleaves with another's) ------
    def _send(self, kind: str, **fields) -> None:
        data = json.dumps({"kind": kind, "role": self.role, "n": self.number, **fields}) + "\n"
        view = memoryview(data.encode())
        while view:
            view = view[os.write(self._result_fd, view) :]

    def ready(self) -> None:
        self._send("ready")

    def done(self, figures: dict) -> None:
        self._send("done", **_encode(figures))

    def failed(self, why: str) -> None:
        self._send("failed", why=why)

    # -- the board --------------------------------------------------------------------------------
    def wait_go(self, timeout: float) -> bool:
        """True once the runner says go; False at the timeout or if the runner is gone."""
        return bool(_readable([self._go_fd], timeout)) and self.board.go and not self.board.stop

    def stopped(self) -> bool:
        return self.board.stop

    def wait_stop(self, timeout: float) -> None:
        _readable([self._stop_fd], timeout)

    @property
    def t0(self) -> float:
        return self.board.t0

    def cpu_s(self) -> float:
        """CPU seconds of this client so far: its process, or its thread in the baseline."""
        ru = resource.getrusage(
            resource.RUSAGE_SELF if self.own_process else resource.RUSAGE_THREAD
        )
        return ru.ru_utime + ru.ru_stime


ClientMain = Callable[[Link], None]


def _run(main: ClientMain, link: Link) -> None:
    """Run one client's body; any failure becomes its one-line "failed" message."""
    try:
        main(link)
    except Exception as e:  # noqa: BLE001 - any failure ends this client; the runner reports it
        text = str(e).splitlines()[0] if str(e) else ""
        try:
            link.failed(f"{type(e).__name__}: {text}")
        except OSError:
            pass  # the runner is gone


def child_main(argv: Sequence[str]) -> int:
    """A client process's main: `MODULE ROLE NUMBER SLOTS BOARD_FD WORK_FD GO_FD STOP_FD RESULT_FD`;
    runs MODULE's client_main(link)."""
    module, role, number, slots = argv[0], argv[1], int(argv[2]), int(argv[3])
    board_fd, work_fd, go_fd, stop_fd, result_fd = (int(a) for a in argv[4:9])
    work = json.loads(os.pread(work_fd, os.fstat(work_fd).st_size, 0))
    os.close(work_fd)
    link = Link(role, number, work, Board(board_fd, slots), go_fd, stop_fd, result_fd, True)
    _run(importlib.import_module(module).client_main, link)
    return 0


@dataclass
class _Client:
    role: str
    number: int
    fd: int  # read end of its result pipe
    child: Child | None = None
    thread: threading.Thread | None = None
    buf: bytes = b""
    eof: bool = False
    exit_text: str | None = None


@dataclass
class ClientSet:
    """The runner's side: start the clients, hear from them, keep the board, stop and reap them.

    `label(role, n)` names a client in failure lines. Failures collect in `failures`; each
    client's final figures in `done` ({} for a client that failed or died).
    """

    module: str  # the workload's client module, run as `python -m module`
    work: dict
    roles: list[tuple[str, int]]
    slots: int
    cwd: Path  # the clients' working directory (the level's log directory)
    stderr: Path  # where the clients' own stderr goes (a crash's traceback)
    label: Callable[[str, int], str] = lambda role, n: f"{role} client {n}"
    threads: ClientMain | None = None  # run this body in threads instead of processes
    ready: set = field(default_factory=set)
    done: dict = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.board = Board.create(self.slots)
        self._clients: dict[tuple[str, int], _Client] = {}
        self._go_r, self._go_w = os.pipe()
        self._stop_r, self._stop_w = os.pipe()
        self._final: list[int] | None = None
        self._work_fd = os.memfd_create("mallocsweep-work", os.MFD_CLOEXEC)
        os.write(self._work_fd, json.dumps(self.work).encode())

    # -- start ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every client (a client that cannot start is a failure, not an exception)."""
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, env.get("PYTHONPATH")]))
        self.cwd.mkdir(parents=True, exist_ok=True)
        for role, n in self.roles:
            r, w = os.pipe()
            c = self._clients[(role, n)] = _Client(role, n, r)
            try:
                if self.threads is not None:
                    link = Link(role, n, self.work, self.board, self._go_r, self._stop_r, w, False)
                    c.thread = threading.Thread(
                        target=self._thread_body, args=(link, w), name=f"{role}-{n}", daemon=True
                    )
                    c.thread.start()
                    continue
                fds = [self.board.fd, self._work_fd, self._go_r, self._stop_r, w]
                argv = [sys.executable, "-s", "-m", __name__, self.module, role, str(n)]
                argv.append(str(self.slots))
                c.child = spawn(
                    [*argv, *map(str, fds)],
                    env=env,
                    cwd=self.cwd,
                    stderr=self.stderr,
                    death_signal=signal.SIGKILL,
                    pass_fds=fds,
                )
            except (OSError, ServerError) as e:
                self.failures.append(f"{self.label(role, n)} could not start: {e}")
                self.done[(role, n)] = {}
                c.eof = True
            finally:
                if self.threads is None:
                    os.close(w)  # the client holds the only write end: its exit is our EOF

    def _thread_body(self, link: Link, w: int) -> None:
        try:
            _run(self.threads, link)
        finally:
            os.close(w)

    def wait_ready(self, timeout_s: float, what: str) -> None:
        """Until every client has connected, one failed, or `timeout_s` (a failure naming `what`)."""
        deadline = time.monotonic() + timeout_s
        while len(self.ready) < len(self._clients) and not self.failures:
            if time.monotonic() >= deadline:
                self.failures.append(
                    f"only {len(self.ready)} of {len(self._clients)} clients connected within {what}"
                )
                return
            self.take(min(0.5, deadline - time.monotonic()))
            interrupts.check()  # safe point: finish() stops and reaps the clients

    # -- the board ----------------------------------------------------------------------------------
    def go(self, t0: float) -> None:
        self.board.set_go(t0)
        self._close_once("_go_w")

    def stop(self) -> None:
        self.board.set_stop()
        self._close_once("_stop_w")

    @property
    def stopping(self) -> bool:
        return self.board.stop

    def _close_once(self, name: str) -> None:
        fd = getattr(self, name)
        if fd is not None:
            os.close(fd)
            setattr(self, name, None)

    def counts(self) -> list[int]:
        """The board's slots now (after finish(): as the clients left them)."""
        return self._final if self._final is not None else self.board.slots.tolist()

    def finished(self, keys) -> bool:
        return all(k in self.done for k in keys)

    # -- messages ---------------------------------------------------------------------------------
    def take(self, timeout: float, wake: bool = True) -> bool:
        """Handle what the clients said within `timeout` (a signal ends the wait early when
        `wake`); False when nothing came."""
        live = {c.fd: c for c in self._clients.values() if not c.eof}
        fds = list(live)
        wake_fd = interrupts.wake_fd() if wake else None
        if wake_fd is not None:
            fds.append(wake_fd)
        if not fds:
            return False
        r = _readable(fds, timeout)
        got = False
        for fd in r:
            if fd in live:
                got = True
                self._read(live[fd])
        return got

    def _read(self, c: _Client) -> None:
        chunk = os.read(c.fd, 1 << 16)
        if not chunk:
            c.eof = True
            self._ended(c)
            return
        c.buf += chunk
        *lines, c.buf = c.buf.split(b"\n")
        for line in lines:
            msg = json.loads(line)
            key = (c.role, c.number)
            if msg["kind"] == "ready":
                self.ready.add(key)
            elif msg["kind"] == "done":
                self.done[key] = _decode(msg)
            else:
                self.failures.append(f"{self.label(*key)}: {msg['why']}")
                self.done[key] = {}

    def _ended(self, c: _Client) -> None:
        """Its pipe closed: a client that said neither done nor failed died; say how."""
        key = (c.role, c.number)
        if key in self.done:
            return
        how = "ended without a word"
        ex = c.child.wait(_REAP_S) if c.child is not None else None
        if self.board.stop and (c.child is None or (ex is not None and ex.returncode == 0)):
            # Told to stop before go (the level gave up starting): it left quietly, as asked.
            self.done[key] = {}
            return
        if c.child is not None:
            how = ex.describe if ex is not None else "closed its result pipe"
            last = _last_line(self.stderr)
            if ex is not None and ex.returncode not in (None, 0) and last:
                how += f" ({last})"
        self.failures.append(f"{self.label(*key)} {how}")
        self.done[key] = {}

    # -- stop -----------------------------------------------------------------------------------------
    def finish(self, grace_s: float) -> None:
        """Stop every client and reap it, whatever happened: `stop`, then up to `grace_s` for
        their last messages, then SIGKILL for a client stuck in a driver call."""
        self.stop()
        self._close_once("_go_w")  # a client still waiting to start returns at once
        deadline = time.monotonic() + grace_s
        while not self.finished(self._clients) and time.monotonic() < deadline:
            self.take(min(0.5, deadline - time.monotonic()), wake=False)
        for c in self._clients.values():
            if c.child is not None:
                if c.child.wait(10) is None:
                    c.child.signal_group(signal.SIGKILL)  # our own child's group, by pid
                    c.child.wait(10)
            elif c.thread is not None:
                c.thread.join(timeout=10)
        self._final = self.board.slots.tolist()
        for c in self._clients.values():
            os.close(c.fd)
        if any(c.thread is not None and c.thread.is_alive() for c in self._clients.values()):
            return  # a thread stuck in a driver call still uses the board and pipes: leave them
        for name in ("_go_r", "_stop_r", "_work_fd"):
            os.close(getattr(self, name))
        self.board.close()
        if self.stderr.exists() and self.stderr.stat().st_size == 0:
            self.stderr.unlink()

    def life_cpu_s(self) -> float | None:
        """Whole-life CPU of the client processes (wait4), or None for threads."""
        if self.threads is not None:
            return None
        total = 0.0
        for c in self._clients.values():
            if c.child is not None and c.child.exit is not None:
                ru = c.child.exit.rusage
                total += ru.get("ru_utime", 0.0) + ru.get("ru_stime", 0.0)
        return round(total, 3)


def _last_line(path: Path) -> str | None:
    """The last line a client wrote on stderr (a traceback's exception line), if any."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return None
    return lines[-1][:200] if lines else None


if __name__ == "__main__":
    raise SystemExit(child_main(sys.argv[1:]))
