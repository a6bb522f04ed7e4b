"""How clients reach the server under test (ClientTarget).

A family says it (suites/families: target, remote_target) and a workload's clients use it
(suites/workloads): it lives below both, so neither imports the other for it. Imports nothing of
ours.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClientTarget:
    """How clients reach the server under test: a unix socket or 127.0.0.1 on this machine, or
    the server's bound address over TCP from a client host (with that host's own account)."""

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
