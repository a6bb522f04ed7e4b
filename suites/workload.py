"""What every workload shares: where its clients connect, and what one level produces.

A workload (sysbench sweep, iibench) is a thin leaf over this: it prepares its data once, and runs
one level (a thread/client count for a duration) into a LevelResult. The runner owns servers and
collectors; a workload only talks to the server as a client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ClientTarget:
    """How clients reach the server under test. Local only: a unix socket or 127.0.0.1."""

    kind: str  # "mysql" or "mongodb"
    host: str = "127.0.0.1"
    port: int = 0
    socket: str | None = (
        None  # preferred for local MySQL clients: no TCP SYN backlog at 1536 threads
    )
    user: str = "root"
    password: str = ""
    database: str = "sbtest"

    @classmethod
    def mysql(cls, info: dict, database: str) -> ClientTarget:
        """From a MySQL-family server's client_target() dict (socket, port, host, user, password)."""
        return cls(
            kind="mysql",
            host=info.get("host", "127.0.0.1"),
            port=info.get("port", 0),
            socket=info.get("socket"),
            user=info.get("user", "root"),
            password=info.get("password", ""),
            database=database,
        )


# Called by a running level once per reporting interval: (seconds since level start, tps, qps).
IntervalCallback = Callable[[float, float, float], None]


@dataclass
class LevelResult:
    """One level's figures as the workload itself measured them (server-side figures come from
    the collectors). Latencies in milliseconds; rates per second over `duration_s`."""

    workload: str
    threads: int
    status: str = "ok"  # "ok" or "failed"
    error: str | None = None
    duration_s: float = 0.0
    events: int = 0  # transactions (sysbench) or rows inserted (iibench): the "op" in per-op rates
    tps: float = 0.0
    qps: float = 0.0
    lat_avg_ms: float | None = None
    lat_p50_ms: float | None = None
    lat_p95_ms: float | None = None
    lat_p99_ms: float | None = None
    lat_p999_ms: float | None = None
    lat_max_ms: float | None = None
    errors: int = 0
    reconnects: int = 0
    intervals: list[dict] = field(
        default_factory=list
    )  # per-interval figures, t_s relative to level start
    raw_log: Path | None = None
    extra: dict = field(
        default_factory=dict
    )  # workload-specific (e.g. iibench rows, per-client rates)

    def row(self) -> dict:
        """The results.csv fields this result owns."""
        d = asdict(self)
        for k in ("intervals", "raw_log", "extra", "status", "error"):
            d.pop(k)
        return d
