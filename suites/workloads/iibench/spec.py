"""What an iibench load is: the settings (validated once, here) and the schema they imply.

The schema is the insert-benchmark's classic shape, written from its description: an ordered
primary key that every insert appends to, and up to three secondary indexes whose keys are random,
so each insert dirties random leaf pages. Secondary index maintenance is what the load stresses.
"""

from __future__ import annotations

from dataclasses import dataclass

from suites.errors import SuiteError

TABLE = "purchases"  # MySQL table and MongoDB collection

# Secondary indexes in the order they are enabled: secondary_indexes=N keeps the first N.
SECONDARY_INDEXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ix_price_customer", ("price", "customerid")),
    ("ix_register_price_customer", ("cashregisterid", "price", "customerid")),
    ("ix_price_date_customer", ("price", "dateandtime", "customerid")),
)

# Inclusive ranges of the random secondary values.
CASHREGISTER_MAX = 1000
CUSTOMER_MAX = 100_000
PRODUCT_MAX = 10_000
PRICE_MAX = 500.0

# InnoDB caps a row at 65,535 bytes, counting a VARCHAR at its charset's widest: 4 bytes a
# character under utf8mb4 (MySQL 8's default), so VARCHAR(16383) is the most it takes. 16,000 leaves
# room for the other columns; a MongoDB document (16 MiB) is never the limit.
DATA_LENGTH_MAX = 16_000

# A MySQL insert batch is one statement, which must fit the server's max_allowed_packet (16 MiB by
# default on MariaDB 10.2+, 64 MiB on MySQL 8): a row's SQL text is its data plus at most
# ROW_SQL_BYTES ("('2024-01-01 00:00:00',1000,100000,10000,499.99,''),"), behind one INSERT prefix.
ROW_SQL_BYTES = 64
INSERT_PREFIX_BYTES = 128


def insert_statement_bytes(batch_rows: int, data_length: int) -> int:
    """An upper bound of one MySQL insert batch's size (the data column is ASCII): the one bound
    both the suite's load-time check and the MySQL backend's check against the server use (the
    tests hold it against suites.families.mysql.iibench_backend.insert_sql's real statements)."""
    return INSERT_PREFIX_BYTES + batch_rows * (data_length + ROW_SQL_BYTES)


class IIBenchSettingError(SuiteError):
    """One iibench setting is wrong: `field` names it, `reason` says what is expected."""

    def __init__(self, field: str, value, reason: str):
        self.field, self.value, self.reason = field, value, reason
        super().__init__(f"iibench.{field} = {value!r}: {reason}")


@dataclass(frozen=True)
class IIBenchSpec:
    """One iibench level. Stops at `max_rows` rows in total or after `max_seconds`, whichever
    comes first; max_seconds = 0 means no time limit. A row limit is always set (a time-only run
    sets a large max_rows): "max rows 0" is bad input, not a hidden "no limit".

    clients are separate processes so the Python client is never the bottleneck; query_clients
    run range queries on the first secondary index while the inserts go on.
    """

    clients: int = 10
    max_rows: int = 1_000_000
    max_seconds: float = 0.0
    batch_rows: int = 1000
    secondary_indexes: int = 3
    data_length: int = 10
    query_clients: int = 0
    report_interval_s: float = 1.0
    seed: int = 1
    # A level where no client inserts a row for this long has hung (server stalled or wedged).
    stall_timeout_s: float = 300.0
    # Time allowed for every client process to start and connect before the clock starts.
    startup_timeout_s: float = 120.0
    # The storage engine of the table (MySQL family; suites.families.mysql.engines): a cell's own dimension.
    engine: str = "innodb"

    def __post_init__(self) -> None:
        def bad(field: str, why: str) -> SuiteError:
            return IIBenchSettingError(field, getattr(self, field), why)

        at_least_one = {
            "clients": "expected a whole number >= 1",
            "batch_rows": "expected a whole number >= 1",
            "max_rows": "expected a whole number >= 1 (a time-only run sets max_seconds and a "
            "large max_rows)",
        }
        for name, why in at_least_one.items():
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise bad(name, why)
        for name in ("query_clients", "data_length", "seed"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise bad(name, "expected a whole number >= 0")
        if (
            not isinstance(self.secondary_indexes, int)
            or isinstance(self.secondary_indexes, bool)
            or not 0 <= self.secondary_indexes <= len(SECONDARY_INDEXES)
        ):
            raise bad("secondary_indexes", f"expected 0..{len(SECONDARY_INDEXES)}")
        for name in ("max_seconds", "report_interval_s", "stall_timeout_s", "startup_timeout_s"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or isinstance(v, bool) or not 0 <= v < float("inf"):
                raise bad(name, "expected a finite number of seconds >= 0")
        for name in ("report_interval_s", "stall_timeout_s", "startup_timeout_s"):
            if getattr(self, name) <= 0:
                raise bad(name, "expected a number of seconds > 0")
        if self.data_length > DATA_LENGTH_MAX:
            raise bad(
                "data_length",
                f"expected at most {DATA_LENGTH_MAX} characters (InnoDB's row limit under utf8mb4)",
            )
        if self.query_clients and not self.secondary_indexes:
            raise bad(
                "query_clients", "queries use the first secondary index; set secondary_indexes >= 1"
            )

    @property
    def indexes(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The secondary indexes this spec creates, in order."""
        return SECONDARY_INDEXES[: self.secondary_indexes]
