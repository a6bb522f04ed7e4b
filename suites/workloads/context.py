"""What a workload's levels and warmup get from the cell they run in: a narrow, typed context.

A workload plugin (suites/workloads/) never sees the cell runner, its server or its collectors.
Its `phases(ctx)` and `warmup(ctx)` get a LevelContext, which offers exactly:

- where it runs: `suite` (its settings, read-only), `engine` (its tables' storage engine),
  `logs` (the cell's log directory: raw client output goes there, kept with the run), `work`
  (the cell's scratch directory, removed when the cell ends), `clients` (the client host(s) its
  levels run on, or None: this machine), `dataset` (the prepared dataset it restored, or None);
- how to reach the server: `target()` (local clients), `remote_target()` (a client host's
  account of this server life), `connect()` (a control connection of ours, e.g. a SET GLOBAL or
  many short sessions; the caller closes it);
- how to run a client: `run_client(argv, log)` runs one client program to its end (a dump, a
  loader), killed with us; a level's load generators go through suites.workloads.level_loop;
- what it reports: `progress(label, seconds)` (the console), `on_interval(t, tps, qps)` (a
  level's interval report: the timeline and the measured window's marks), `on_warmup_interval`
  (the timeline only: warmup is never per-op);
- what the server says: `counter(meaning)` reads one status counter by what it means
  (rundir.format.COUNTER_MEANINGS: "memory_used_bytes", "threads_created", ...), whatever the
  server calls it (its family declares the names); None where the server has no such counter;
- what the server is: `server` (the resolved binary: flavor, version, path, root: where its own
  client programs are), and `memory_now()` (its RSS now, cheaply: a spike's idle time follows it).

Extending it (a workload that runs a dump client, or opens many short connections and reads
"memory used" at each cycle's boundary): those are run_client, connect and counter. A run
holding several servers gives each cell its own context, for its own server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servers.launch import ExitInfo
from suites.workloads.level_loop import run_to_end
from suites.workloads.level_result import ClientTarget
from suites.workloads.warmup import by_name

# A client program gets nothing of our environment but this (and what the caller adds).
CLIENT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}


@dataclass(frozen=True)
class ClientRun:
    """One client program run to its end by LevelContext.run_client."""

    exit: ExitInfo | None  # None: killed at its time limit
    seconds: float
    log: Path

    @property
    def ok(self) -> bool:
        return self.exit is not None and self.exit.returncode == 0


class LevelContext:
    """The cell as its workload sees it (see the module docstring). Made by the cell for its
    levels and warmup; `cell` is the suites.runner.workload_cell.WorkloadCell running them."""

    def __init__(self, cell):
        self._cell = cell

    # -- where it runs ----------------------------------------------------------------------------
    @property
    def suite(self):
        return self._cell.ctx.suite

    @property
    def engine(self) -> str:
        return self._cell.plan.engine

    @property
    def logs(self) -> Path:
        return self._cell.logs

    @property
    def work(self) -> Path:
        return self._cell.work

    @property
    def clients(self):
        """suites.remote.clients.RemoteClients or suites.remote.hosts.ClientHosts, or None."""
        return self._cell.ctx.clients

    @property
    def dataset(self):
        """The prepared dataset this cell restored (suites.datasets.prepare.Prepared), or None."""
        return self._cell.ctx.dataset

    # -- the server, as a client sees it --------------------------------------------------------
    def target(self) -> ClientTarget:
        return self._cell.target()

    def remote_target(self) -> ClientTarget:
        return self._cell.remote_target()

    def connect(self) -> Any:
        """A new control connection to the server (the family's driver); the caller closes it."""
        return self._cell.family.connect(self._cell.server)()

    def counter(self, meaning: str) -> float | None:
        """The server's status counter with this meaning, now; None where it has none."""
        return self.counters(meaning)[meaning]

    def counter_name(self, meaning: str) -> str | None:
        """What the server calls the counter with this meaning (None: it has none)."""
        return self._cell.counters().get(meaning)

    def counters(self, *meanings: str) -> dict[str, float | None]:
        """Several counters from one status read."""
        names = self._cell.counters()
        status = self._cell.status_source()
        wanted = status is not None and any(m in names for m in meanings)
        values = by_name(status()) if wanted else {}  # servers differ in case
        return {m: values.get(names[m].lower()) if m in names else None for m in meanings}

    # -- clients and reports --------------------------------------------------------------------
    def run_client(
        self,
        argv: list[str],
        log: Path,
        *,
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
        in_root: bool = False,
    ) -> ClientRun:
        """Run one client program to its end, in the cell's work directory, its output appended
        to `log` (under `logs`). OSError when it cannot start. `in_root`: argv[0] is a program of
        the server's root (`server.root`), run there under chroot with the work directory and
        the server's socket at the same paths (as the server itself runs); on the host, as is."""
        log = Path(log)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as f:
            f.write(("# mallocsweep: " + " ".join(argv) + "\n").encode())
        launch = getattr(self._cell.server, "client_launch", None)
        root = launch() if in_root and launch is not None else None
        ended, seconds = run_to_end(
            argv, CLIENT_ENV | (env or {}), log, self.work, timeout_s, argv[0], root=root
        )
        return ClientRun(ended, round(seconds, 3), log)

    # -- the server itself ------------------------------------------------------------------------
    @property
    def server(self):
        """The resolved server binary (suites.families.mysql.flavor.ServerBinary for the MySQL family:
        flavor, version, path, root)."""
        return self._cell.ctx.server_binary

    def memory_now(self) -> tuple[float, int | None]:
        """(seconds on the cell's timeline clock, the server's RSS in kB now; None once it is
        gone): /proc/PID/status alone, cheap enough to follow RSS every second."""
        return self._cell.collectors.memory_now()

    def progress(self, label: str, seconds: float) -> None:
        """What the console shows as running now, and how long it is expected to take."""
        on_progress = self._cell.ctx.on_progress
        if on_progress is not None:
            on_progress(label, seconds)

    def on_interval(self, t: float, tps: float, qps: float) -> None:
        """A level's interval report: (seconds since its load started, transactions/s,
        operations/s). The timeline's throughput, and a mark of the measured window."""
        self._cell.on_interval(t, tps, qps)

    def on_warmup_interval(self, t: float, tps: float, qps: float) -> None:
        """A warmup's interval report: the timeline only (no measured window)."""
        self._cell.warmup_throughput(t, tps, qps)
