"""Row generation: primary keys in order, secondary values at random, one batch at a time.

Each client draws from its own generator seeded by (seed, client number), so a level is
reproducible and no two clients produce the same value stream. Generation must stay cheap next to
the server's work (the client may not become the bottleneck, issue 19): a batch is drawn as
columns, one list comprehension each over random() (randint/uniform cost several Python calls per
value), and the `data` strings are slices of one random pool made once. Measured here for 1,000
rows: 2.3 ms as tuples from randint/uniform, plus 4.5 ms to format the INSERT row by row; as
columns with one %-format, about 2.5 ms in all. numpy drew the columns ~0.7 ms faster, but
importing it cost each client process 0.11 s of CPU: more than it saves on a level of under
~150k rows per client, so it is not used.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from datetime import datetime

from suites.workloads.iibench.spec import CASHREGISTER_MAX, CUSTOMER_MAX, PRICE_MAX, PRODUCT_MAX

# Column order of a generated row (and of the MySQL INSERT column list).
COLUMNS = (
    "transactionid",
    "dateandtime",
    "cashregisterid",
    "customerid",
    "productid",
    "price",
    "data",
)
# Letters and digits only: the values can be written into SQL literals without escaping.
ALPHABET = string.ascii_letters + string.digits
_POOL_MIN = 8192
# Prices are drawn in whole cents, so that a price is exact both as a SQL literal and as a float.
_PRICE_CENTS_MAX = round(PRICE_MAX * 100)


@dataclass(frozen=True)
class Batch:
    """`n` rows as columns (primary keys first_id, first_id + 1, ...), all stamped `when`."""

    first_id: int
    when: datetime
    cashregisterid: list[int]
    customerid: list[int]
    productid: list[int]
    price_cents: list[int]
    data: list[str]

    def __len__(self) -> int:
        return len(self.data)

    def rows(self) -> list[tuple]:
        """The batch as row tuples in COLUMNS order (price in currency units, a float)."""
        return [
            (self.first_id + i, self.when, c, cu, p, cents / 100, d)
            for i, (c, cu, p, cents, d) in enumerate(
                zip(
                    self.cashregisterid,
                    self.customerid,
                    self.productid,
                    self.price_cents,
                    self.data,
                    strict=True,
                )
            )
        ]


class RowSource:
    """Batches of rows for one client: (transactionid, dateandtime, cashregisterid, customerid,
    productid, price, data)."""

    def __init__(self, seed: int, client: int, data_length: int):
        # Distinct, stable streams per client; Random accepts any int as a seed.
        self._rng = random.Random(seed * 1_000_003 + client)
        self.data_length = data_length
        size = max(_POOL_MIN, 4 * data_length)
        self._pool = "".join(self._rng.choices(ALPHABET, k=size))
        self._last_offset = size - data_length

    def next_batch(self, first_id: int, n: int, when: datetime) -> Batch:
        """The next `n` rows of this client's stream, as columns."""
        # int(random() * k) is uniform over 0..k-1 to within 2**-53: no bias a benchmark can see.
        r, pool, length, rows = self._rng.random, self._pool, self.data_length, range(n)
        offsets = self._last_offset + 1
        return Batch(
            first_id=first_id,
            when=when,
            cashregisterid=[int(r() * (CASHREGISTER_MAX + 1)) for _ in rows],
            customerid=[int(r() * (CUSTOMER_MAX + 1)) for _ in rows],
            productid=[int(r() * (PRODUCT_MAX + 1)) for _ in rows],
            price_cents=[int(r() * (_PRICE_CENTS_MAX + 1)) for _ in rows],
            data=[pool[o : o + length] for o in [int(r() * offsets) for _ in rows]],
        )

    def batch(self, first_id: int, n: int, when: datetime) -> list[tuple]:
        """`n` rows with primary keys first_id, first_id+1, ...; all stamped `when`."""
        return self.next_batch(first_id, n, when).rows()

    def query_price(self) -> float:
        """A random lower bound for a price range query."""
        return int(self._rng.random() * (_PRICE_CENTS_MAX + 1)) / 100
