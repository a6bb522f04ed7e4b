"""Row generation: primary keys in order, secondary values at random.

Each client draws from its own generator seeded by (seed, client number), so a level is
reproducible and no two clients produce the same value stream. Generation must stay cheap next to
the server's work (the client may not become the bottleneck): the `data` strings are slices of one
random pool made once, not fresh random strings per row.
"""

from __future__ import annotations

import random
import string
from datetime import datetime

from suites.iibench.spec import CASHREGISTER_MAX, CUSTOMER_MAX, PRICE_MAX, PRODUCT_MAX

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

    def batch(self, first_id: int, n: int, when: datetime) -> list[tuple]:
        """`n` rows with primary keys first_id, first_id+1, ...; all stamped `when`."""
        rng = self._rng
        randint, uniform, randrange = rng.randint, rng.uniform, rng.randrange
        pool, length, last = self._pool, self.data_length, self._last_offset
        rows = []
        for pk in range(first_id, first_id + n):
            off = randrange(last + 1)
            rows.append(
                (
                    pk,
                    when,
                    randint(0, CASHREGISTER_MAX),
                    randint(0, CUSTOMER_MAX),
                    randint(0, PRODUCT_MAX),
                    round(uniform(0.0, PRICE_MAX), 2),
                    pool[off : off + length],
                )
            )
        return rows

    def query_price(self) -> float:
        """A random lower bound for a price range query."""
        return round(self._rng.uniform(0.0, PRICE_MAX), 2)
