"""The servers of a run: one, or several ([server] servers: an upgrade check), each resolved to its
binary, label and allocator builds before anything is written.

Each server is its own family's (suites.families.registry.server_entries gives every entry as a
full [server] section), with its own binary, its own root (so its own glibc and allocator
packages) and its own pristine dataset (suites.datasets.prepare keys the cache by the binary: a
server never gets another's datadir). In a run with several, a server's label is NAME:LABEL
(`old:mariadb-10.11.18`): results rows, verdicts and cell names keep the servers apart even when
two names run the same build (a server A/A check).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servers.allocators import Allocator
from suites.config.sections import ServerSection
from suites.families.base import Family
from suites.families.registry import family_for, server_entries
from suites.runner.plan import ServerPlan


def named_label(name: str, label: str) -> str:
    """A server's label in a run with several: NAME:LABEL; the plain label for a run of one."""
    return f"{name}:{label}" if name else label


@dataclass
class RunServer:
    """One server of the run, resolved."""

    name: str  # "" in a run of one server
    section: ServerSection  # its [server] settings (the suite's, with its own source)
    family: Family
    binary: Any = None  # what its family's resolve() found
    label: str = ""  # NAME:FLAVOR-VERSION (FLAVOR-VERSION for a run of one)
    allocators: list[Allocator] = field(default_factory=list)
    spec: str = ""  # the entry as given (host, fetched:SPEC, ...), "" for a run of one

    @property
    def root(self):
        """Its server root (servers.root.ServerRoot), or None for a server on the host."""
        return getattr(self.binary, "root", None)

    def resolve(self) -> None:
        self.binary, plain = self.family.resolve(self.section)
        self.label = named_label(self.name, plain)

    def plan(self) -> ServerPlan:
        return ServerPlan(self.name, self.label, tuple(a.name for a in self.allocators))

    def to_manifest(self, host_glibc: str | None = None) -> dict:
        """What the run-level record keeps of it (manifest "servers"): what it is, where it came
        from, what runs under it (its glibc, its allocator builds)."""
        b = self.binary
        root = self.root
        return {
            "name": self.name,
            "label": self.label,
            "family": self.family.name,
            "flavor": getattr(b, "flavor", None),
            "version": getattr(b, "version", None),
            "version_string": getattr(b, "version_string", None),
            "binary": getattr(b, "path", None),
            "sha256": getattr(b, "sha256", None),
            "spec": self.spec or None,
            "fetched": getattr(self.section, "fetched", "") or None,
            "root": root.to_manifest() if root is not None else None,
            "glibc": (root.glibc if root is not None else host_glibc),
            "allocators": [a.to_manifest() for a in self.allocators],
        }


def run_servers(suite) -> list[RunServer]:
    """The suite's servers, baseline first (unresolved: resolve() each before use)."""
    specs = {e.name: e.spec for e in suite.server.servers}
    out = [
        RunServer(name, section, family_for(section), spec=specs.get(name, ""))
        for name, section in server_entries(suite)
    ]
    base = suite.server.baseline_name
    return sorted(out, key=lambda s: s.name != base)
