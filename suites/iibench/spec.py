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

# A hard cap keeps one row well inside InnoDB's and MongoDB's row/document limits.
DATA_LENGTH_MAX = 65_000


@dataclass(frozen=True)
class IIBenchSpec:
    """One iibench level. Stops at `max_rows` rows in total or after `max_seconds`, whichever
    comes first; 0 disables that limit (not both).

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

    def __post_init__(self) -> None:
        def bad(field: str, why: str) -> SuiteError:
            return SuiteError(f"iibench.{field} = {getattr(self, field)!r}: {why}")

        for name in ("clients", "batch_rows"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise bad(name, "expected a whole number >= 1")
        for name in ("max_rows", "query_clients", "data_length", "seed"):
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
            if not isinstance(v, int | float) or isinstance(v, bool) or v != v or v < 0:
                raise bad(name, "expected a number of seconds >= 0")
        for name in ("report_interval_s", "stall_timeout_s", "startup_timeout_s"):
            if getattr(self, name) <= 0:
                raise bad(name, "expected a number of seconds > 0")
        if self.max_rows == 0 and self.max_seconds == 0:
            raise bad("max_rows", "with max_seconds = 0 the load would never stop; set either > 0")
        if self.data_length > DATA_LENGTH_MAX:
            raise bad("data_length", f"expected at most {DATA_LENGTH_MAX} characters")
        if self.query_clients and not self.secondary_indexes:
            raise bad(
                "query_clients", "queries use the first secondary index; set secondary_indexes >= 1"
            )

    @property
    def indexes(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The secondary indexes this spec creates, in order."""
        return SECONDARY_INDEXES[: self.secondary_indexes]
