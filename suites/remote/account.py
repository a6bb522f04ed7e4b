"""The account a client host's sysbench logs in with.

Root is reachable over the unix socket only (a datadir's root@localhost); a client host comes over
TCP from another address, so each server life gets an account of its own with a fresh random
password, allowed on the benchmark's database only. The password is never recorded (the level's
recorded argv masks it) and dies with the cell's datadir copy.
"""

from __future__ import annotations

import secrets

USER = "mallocsweep_client"


def client_account(connect, database: str) -> tuple[str, str]:
    """Create the account on a running server (`connect()` gives a root connection)."""
    password = secrets.token_hex(16)
    conn = connect()
    try:
        cur = conn.cursor()
        cur.execute(f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY %s", (password,))
        cur.execute(f"ALTER USER '{USER}'@'%' IDENTIFIED BY %s", (password,))
        cur.execute(f"GRANT ALL PRIVILEGES ON `{database}`.* TO '{USER}'@'%'")
        cur.close()
    finally:
        conn.close()
    return USER, password
