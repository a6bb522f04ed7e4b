"""How clients reach the server under test (ClientTarget), and the driver they speak it with.

A family says it (suites/families: target, remote_target) and a workload's clients use it
(suites/workloads): it lives below both, so neither imports the other for it. A target names its
family's driver by reference ("module:NAME", suites.families.driver), which load_driver imports
on first use: the same in a load client's process and on a client host, with no registry to
import and no kind to dispatch on. Imports nothing of ours at the top.
"""

from __future__ import annotations

import importlib
from dataclasses import InitVar, dataclass
from functools import cache

# The shipped drivers by the names a ClientTarget's `kind` had before targets named their driver:
# a family plugin written then (ClientTarget(kind="mysql", ...)) still works.
LEGACY_KINDS = {
    "mysql": "suites.families.mysql.driver:DRIVER",
    "mongodb": "suites.families.mongodb.driver:DRIVER",
}


@cache
def load_driver(ref: str):
    """The driver a target names ("module:NAME")."""
    module, _, name = ref.partition(":")
    if not module or not name:
        raise ValueError(f"a driver reference is 'module:NAME', not {ref!r}")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class ClientTarget:
    """How clients reach the server under test: a unix socket or 127.0.0.1 on this machine, or
    the server's bound address over TCP from a client host (with that host's own account)."""

    driver_ref: str = ""  # its family's driver, "module:NAME" (Driver.ref)
    host: str = "127.0.0.1"
    port: int = 0
    socket: str | None = (
        None  # preferred for local MySQL clients: no TCP SYN backlog at 1536 threads
    )
    user: str = "root"
    password: str = ""
    database: str = "sbtest"
    kind: InitVar[str | None] = None  # before drivers: "mysql" or "mongodb" (LEGACY_KINDS)

    def __post_init__(self, kind: str | None) -> None:
        if kind is not None and not self.driver_ref:
            if kind not in LEGACY_KINDS:
                raise ValueError(f"ClientTarget kind {kind!r}: give its driver_ref instead")
            object.__setattr__(self, "driver_ref", LEGACY_KINDS[kind])
        if not self.driver_ref:
            raise ValueError("a ClientTarget names its driver (driver_ref)")

    @property
    def driver(self):
        """The family's driver (suites.families.driver.Driver) these clients speak with."""
        return load_driver(self.driver_ref)

    @property
    def protocol(self) -> str:
        """The driver's name, as records say it ("mysql", "mongodb")."""
        return self.driver.name
