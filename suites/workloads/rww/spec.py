"""The read-while-writing settings, their ranges, and the table they run on."""

from __future__ import annotations

from dataclasses import dataclass

from suites.errors import SuiteError

TABLE = "rww"
DATABASE = "rww"
# The largest value a row of (id BIGINT NOT NULL, v VARBINARY(n) NOT NULL) can hold, per engine:
# measured on MariaDB 10.11.19 with CREATE TABLE at n = 65525 (ok) and 65526 ("Row size too
# large") for both InnoDB and MyRocks. Both stop at the SQL layer's 65,535-byte row limit (8 bytes
# of id, 2 of length prefix); the engine decides where it applies, so it is kept per engine.
MAX_VALUE_BYTES = {"innodb": 65_525, "rocksdb": 65_525}
# One load INSERT: "INSERT INTO rww (id,v) VALUES " then "(<id>,'<value>')," per row.
INSERT_PREFIX_BYTES = 64
ROW_OVERHEAD_BYTES = 26  # parentheses, quotes, comma and a 20-digit id
MAX_SECONDS = 7 * 24 * 3600


class RwwSettingError(SuiteError):
    """One [rww] setting is wrong: `field` names it, `reason` says what is expected."""

    def __init__(self, field: str, value, reason: str):
        self.field, self.value, self.reason = field, value, reason
        super().__init__(f"rww.{field} = {value!r}: {reason}")


def load_statement_bytes(batch_rows: int, value_bytes: int) -> int:
    """An upper bound of one load INSERT's size (what max_allowed_packet must hold)."""
    return INSERT_PREFIX_BYTES + batch_rows * (value_bytes + ROW_OVERHEAD_BYTES)


@dataclass(frozen=True)
class RwwSpec:
    """A load of `records` rows of `value_bytes` bytes in key order (batches of `batch_rows` rows,
    one INSERT each), then 1 writer updating random rows and `readers` readers reading random
    rows, until every reader has read `records` rows (the Symas stop rule) or `max_seconds`."""

    records: int = 20_000
    value_bytes: int = 4000
    batch_rows: int = 100
    readers: int = 16
    max_seconds: float = 300.0
    load_max_seconds: float = 600.0
    report_interval_s: float = 1.0
    seed: int = 1
    engine: str | None = "innodb"  # None: checked without an engine's limits (config sections)
    startup_timeout_s: float = 60.0

    def __post_init__(self):
        def bad(field, reason):
            raise RwwSettingError(field, getattr(self, field), reason)

        for name in ("records", "value_bytes", "batch_rows", "readers", "seed"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                bad(name, "expected a whole number")
        if self.records < 1:
            bad("records", "expected at least 1 row")
        if self.readers < 1:
            bad("readers", "expected at least 1 reader (read-while-writing needs readers)")
        if self.readers > 10_000:
            bad("readers", "expected at most 10000 readers")
        if self.batch_rows < 1:
            bad("batch_rows", "expected at least 1 row per INSERT")
        if self.value_bytes < 1:
            bad("value_bytes", "expected at least 1 byte")
        limit = MAX_VALUE_BYTES.get(self.engine) if self.engine is not None else None
        if self.engine is not None and limit is None:
            bad("value_bytes", f"unknown engine {self.engine!r}")
        if limit is not None and self.value_bytes > limit:
            bad(
                "value_bytes",
                f"expected 1 to {limit:,} bytes: {self.engine} stores at most {limit:,} bytes "
                "in a row of (id BIGINT, v VARBINARY) on this server family",
            )
        for name in ("max_seconds", "load_max_seconds", "report_interval_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= MAX_SECONDS:
                bad(name, f"expected seconds, more than 0 and at most {MAX_SECONDS}")
        if self.report_interval_s * 3 > self.max_seconds:
            bad("report_interval_s", "expected at most max_seconds / 3 (a measured window)")

    @property
    def clients(self) -> int:
        return self.readers + 1
