"""iibench on MongoDB through pymongo (the MongoDB driver's iibench backend).

The primary key is `_id`, an ordered integer: clients claim consecutive id blocks from one shared
counter, so inserts arrive in (nearly) ascending `_id` order across all clients, the way
AUTO_INCREMENT does for InnoDB. (ObjectId would also grow, but only per second and per process,
and it would make the row budget inexact.) A batch is one ordered insert_many.
"""

from __future__ import annotations

import pymongo
from pymongo.errors import PyMongoError

from suites.errors import SuiteError
from suites.workloads.iibench.backend import in_spec_order, where
from suites.workloads.iibench.rows import COLUMNS, Batch
from suites.workloads.iibench.spec import TABLE, IIBenchSpec
from suites.workloads.level_result import ClientTarget

_FIELDS = ("_id",) + COLUMNS[1:]


class MongoBackend:
    def __init__(
        self,
        target: ClientTarget,
        *,
        create_database: bool = False,  # MongoDB makes a database at its first write
        connect_timeout_s: float = 10.0,
    ):
        self.target = target
        ms = int(connect_timeout_s * 1000)
        self.client = pymongo.MongoClient(
            target.host,
            target.port,
            directConnection=True,
            serverSelectionTimeoutMS=ms,
            connectTimeoutMS=ms,
            appname="mallocsweep-iibench",
        )
        try:
            self.client.admin.command("ping")
        except PyMongoError as e:
            self.client.close()
            raise SuiteError(
                f"iibench: cannot reach MongoDB at {where(target)}: {str(e).splitlines()[0]}"
            ) from None
        self.coll = self.client[target.database][TABLE]

    def prepare(self, spec: IIBenchSpec) -> None:
        db = self.client[self.target.database]
        db.drop_collection(TABLE)
        db.create_collection(TABLE)
        for name, cols in spec.indexes:
            self.coll.create_index([(c, pymongo.ASCENDING) for c in cols], name=name)

    def insert(self, batch: Batch) -> None:
        docs = [dict(zip(_FIELDS, r, strict=True)) for r in batch.rows()]
        self.coll.insert_many(docs, ordered=True)

    def query(self, price_from: float) -> int:
        cur = (
            self.coll.find({"price": {"$gte": price_from}}, {"_id": 0, "price": 1, "customerid": 1})
            .sort([("price", 1), ("customerid", 1)])
            .limit(10)
        )
        return len(list(cur))

    def count(self) -> int:
        return int(self.coll.count_documents({}))

    def index_keys(self) -> list[tuple[str, tuple[str, ...]]]:
        keys = {}
        for name, info in self.coll.index_information().items():
            if name == "_id_":
                continue
            # An ascending key part is its field name; any other direction says itself.
            keys[name] = tuple(f if d == 1 else f"{f}:{d}" for f, d in info["key"])
        return in_spec_order(keys)

    def close(self) -> None:
        self.client.close()
