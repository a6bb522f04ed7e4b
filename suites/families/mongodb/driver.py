"""The MongoDB family's driver: the wire protocol through pymongo. No SQL and no sysbench: of the
workloads, iibench speaks it (its MongoDB backend)."""

from __future__ import annotations

from suites.families.driver import Driver
from suites.target import ClientTarget


class MongoDriver(Driver):
    name = "mongodb"
    ref = "suites.families.mongodb.driver:DRIVER"
    iibench_backend = "suites.families.mongodb.iibench_backend:MongoBackend"

    def target(self, info: dict, database: str) -> ClientTarget:
        """From a mongod's client_target() dict (host, port)."""
        return ClientTarget(
            driver_ref=self.ref, host=info["host"], port=info["port"], database=database
        )

    def where(self, target) -> str:
        return f"{target.host}:{target.port}"


DRIVER = MongoDriver()
