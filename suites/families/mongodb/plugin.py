"""The MongoDB family: a user-supplied mongod (suites/families/mongodb/server.py), as a plugin.

Particular to it: one setting of its own (the WiredTiger cache), no prepared dataset (each life
starts from an empty dbpath; iibench fills it), a binary that may bring its own allocator (the
official mongod links tcmalloc statically: refused up front under any preload), and clients over
the wire protocol on loopback only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PositiveFloat, model_validator
from pymongo import MongoClient

from servers.checks import Check
from servers.elfcheck import interposes_malloc, malloc_definitions
from servers.errors import ServerError
from servers.which import which_server
from suites.config.errors import FieldError
from suites.config.sections import ServerSection
from suites.families.base import DEFAULT_ENGINE, Family, ServerLaunch, ServerNeeds
from suites.families.mongodb.driver import DRIVER
from suites.families.mongodb.server import STANDIN_NOTE, MongoServer, check_allocators, find_mongod
from suites.target import ClientTarget

# A fresh dbpath's disk before any data, for the preflight. No mongod is packaged for this
# machine, so it is not measured: the bound every family got before families were plugins
# (a 256 MiB log plus 32 MiB of system files), generous for WiredTiger's journal and catalog.
BASE_DBPATH_KB = 288 * 1024


class MongoServerSection(ServerSection):
    flavor: Literal["mongodb"] = Field(
        "mongodb", description="Server family; MySQL-family flavors are detected from --version."
    )
    cache_gb: PositiveFloat = Field(1.0, description="MongoDB WiredTiger cache size in GiB.")

    @model_validator(mode="after")
    def _no_root(self):
        if self.root:
            raise FieldError(
                ("server", "root"), "a server root runs MySQL-family servers only (not mongod)"
            )
        return self


class MongoFamily(Family):
    name = "mongodb"
    flavors = ("mongodb",)
    driver = DRIVER
    section = MongoServerSection
    summary = "MongoDB (a user-supplied mongod)"
    refusals = {
        "engines": "engines are MySQL-family storage engines; MongoDB runs WiredTiger",
        "settings": "these are my.cnf lines for a MySQL-family server; MongoDB does not read them",
        "buffer_pool_mb": "buffer_pool_mb is InnoDB's; mongod's cache is cache_gb",
    }
    no_large_pages = "mongod has no setting that puts its WiredTiger cache on explicit huge pages"

    def cache_kb(self, server) -> int:
        return int(server.cache_gb * 1024 * 1024)

    def needs(self, server, max_threads: int, prepared_statements: int = 0) -> ServerNeeds:
        return ServerNeeds(base_datadir_kb=BASE_DBPATH_KB)

    def doctor_checks(self) -> list[Check]:
        """MongoDB is optional: only the iibench MongoDB suites need a mongod you supply."""
        try:
            b = find_mongod()
        except ServerError as e:
            return [
                Check(
                    "mongod (optional)",
                    False,
                    str(e).splitlines()[0],
                    "only for MongoDB suites: put mongod on PATH or set [server] binary",
                )
            ]
        if b.standin:
            return [Check("mongod (optional)", True, f"{b.path} {b.version}: {STANDIN_NOTE}")]
        # Only a binary that carries its own malloc is limited to 'builtin'; a "system" build is
        # not.
        try:
            own = interposes_malloc(malloc_definitions(Path(b.path)))
        except ServerError:
            own = []  # e.g. a wrapper script: nothing to read, nothing claimed
        detail = f"{b.path} {b.version}; allocator {b.allocator_builtin or 'unknown'}"
        if own:
            detail += f"; defines {', '.join(own)} itself: only 'builtin' can run it"
        elif (b.allocator_builtin or "").startswith("tcmalloc"):
            detail += " linked in: only 'builtin' can run it"
        return [Check("mongod (optional)", True, detail)]

    def resolve(self, server) -> tuple[Any, str]:
        # NAME or PATH, as for MySQL-family servers (`--server mongod`).
        b = find_mongod(str(which_server(server.binary)) if server.binary else None)
        return b, f"mongodb-{b.version}"

    def check_allocators(self, binary, allocators) -> None:
        # A mongod with its own allocator refuses every preload: said once, up front, not once
        # per cell after THP was already changed.
        check_allocators(binary, allocators)

    def make_server(self, launch: ServerLaunch) -> MongoServer:
        return MongoServer(
            launch.binary,
            launch.workdir,
            launch.server.cache_gb,
            launch.allocator,
            thp_disable=launch.thp_disable,
        )

    def status(self, life: MongoServer):
        return life.server_status

    def counters(self, engine: str = DEFAULT_ENGINE, binary=None) -> dict[str, str]:
        # serverStatus flattened (suites.families.mongodb.server.flatten_numeric). The server's own account of
        # its heap: the tcmalloc section of a mongod built with tcmalloc (gperftools' and
        # Google's both say generic.current_allocated_bytes); a mongod on the system allocator,
        # and the tests' stand-in, have none.
        return {"memory_used_bytes": "tcmalloc.generic.current_allocated_bytes"}

    def target(self, life: MongoServer, database: str) -> ClientTarget:
        info = life.client_target()
        return self.driver.target(info, database)

    def connect(self, life: MongoServer):
        info = life.client_target()

        def client() -> MongoClient:
            return MongoClient(
                info["host"], info["port"], directConnection=True, serverSelectionTimeoutMS=5000
            )

        return client

    def datadir(self, workdir: Path) -> Path:
        return Path(workdir) / "db"


MONGODB = MongoFamily()
