"""The allocator's own accounting over one cell: readings at phase boundaries and in the idle phase.

Each reading pairs the allocator's figures (servers.allocstats, read inside the server) with the
process's RSS, swap and thread count read from /proc right after, so "overhead" (RSS / in use)
and the consistency checks compare figures of one moment:
    in_use   <= resident + swap    (the allocator's resident figure where it has one, else RSS)
    resident <= RSS + swap         (what it believes resident is in the process's RSS)
A failed check is kept in the reading and becomes a cell warning: a figure that contradicts the
kernel is reported as such, never silently used.

A reading that fails (the shim did not answer) is recorded with its error; the cell goes on,
its columns stay empty.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from servers.allocstats import FIGURES, AllocStats, to_kb
from servers.errors import ServerError

# results.csv columns this module fills for a level (its end-of-level reading).
LEVEL_COLUMNS = (
    "alloc_in_use_kb",
    "alloc_cached_kb",
    "alloc_mapped_kb",
    "alloc_resident_kb",
    "alloc_overhead",
)


def _proc_status(pid: int, proc: str = "/proc") -> dict:
    out: dict = {}
    try:
        text = Path(proc, str(pid), "status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmSwap"):
            out[key] = int(value.split()[0])
        elif key == "Threads":
            out[key] = int(value)
    return out


def overhead(rss_kb, in_use_kb) -> float | None:
    """RSS / what the application holds: 1.0 would be an allocator (and server) with no overhead."""
    if rss_kb is None or not in_use_kb:
        return None
    return round(rss_kb / in_use_kb, 3)


def consistency(r: dict) -> list[str]:
    """What in reading `r` contradicts the kernel's view (empty: consistent)."""
    rss, swap = r.get("rss_kb"), r.get("swap_kb") or 0
    in_use, resident = r.get("alloc_in_use_kb"), r.get("alloc_resident_kb")
    problems = []
    if rss is None:
        return problems
    # 1% + 64 kB of slack: the two reads are a few milliseconds apart while the server runs.
    slack = max(64, rss // 100)
    ceiling = resident if resident is not None else rss
    if in_use is not None and in_use > ceiling + swap + slack:
        what = "resident" if resident is not None else "RSS"
        problems.append(f"in use {in_use} kB > {what} {ceiling} kB + swap {swap} kB")
    if resident is not None and resident > rss + swap + slack:
        problems.append(f"allocator resident {resident} kB > RSS {rss} kB + swap {swap} kB")
    return problems


class AllocMemory:
    """Readings of one server life. `elapsed()` gives the cell's timeline clock (collectors' t_s)."""

    def __init__(self, stats: AllocStats, pid: int, elapsed: Callable[[], float]):
        self.stats = stats
        self.pid = pid
        self.elapsed = elapsed
        self.readings: list[dict] = []
        self.errors: list[str] = []
        self.api: str | None = None
        self.library: str | None = None
        self.cost_ms: list[float] = []

    def read(self, phase: str, at: str) -> dict | None:
        """One reading tagged with the phase it closes or samples and `at` (what moment it is)."""
        t = self.elapsed()
        try:
            raw = self.stats.read()
        except ServerError as e:
            self.errors.append(f"{phase} ({at}): {e}")
            return None
        st = _proc_status(self.pid)
        self.api = raw.get("api")
        self.library = raw.get("library")
        self.cost_ms.append(raw.get("wall_ms") or 0.0)
        r = {"t_s": round(t, 3), "phase": phase, "at": at}
        r |= to_kb(raw)
        r |= {"rss_kb": st.get("VmRSS"), "swap_kb": st.get("VmSwap"), "threads": st.get("Threads")}
        r["overhead"] = overhead(r["rss_kb"], r["alloc_in_use_kb"])
        r["read_us"] = raw.get("read_us")
        r["detail"] = raw.get("detail")
        problems = consistency(r)
        if problems:
            r["inconsistent"] = problems
        self.readings.append(r)
        return r

    def idle(self, seconds: float, every_s: float, stop: threading.Event | None = None) -> None:
        """The idle phase: no client; a reading every `every_s` until `seconds` have passed."""
        halt = stop or threading.Event()
        start = time.monotonic()
        while True:
            since = time.monotonic() - start
            self.read("idle", "idle")
            if since >= seconds or halt.wait(min(every_s, seconds - since)):
                return

    def level_columns(self, phase: str) -> dict:
        """The results.csv columns of level `phase`: its end-of-level reading (empty if none)."""
        r = next((r for r in self.readings if r["phase"] == phase and r["at"] == "level end"), None)
        if r is None:
            return dict.fromkeys(LEVEL_COLUMNS)
        return {k: r.get(k) for k in LEVEL_COLUMNS[:-1]} | {"alloc_overhead": r["overhead"]}

    def returned(self) -> dict | None:
        """What the idle phase gave back: end of the load vs the last idle reading (kB)."""
        load = [r for r in self.readings if r["at"] == "level end"]
        idle = [r for r in self.readings if r["phase"] == "idle"]
        if not load or not idle:
            return None
        a, b = load[-1], idle[-1]

        def drop(k):
            return None if a.get(k) is None or b.get(k) is None else a[k] - b[k]

        return {
            "idle_s": round(b["t_s"] - a["t_s"], 3),
            "rss_returned_kb": drop("rss_kb"),
            "cached_returned_kb": drop("alloc_cached_kb"),
            "in_use_returned_kb": drop("alloc_in_use_kb"),
            "mapped_returned_kb": drop("alloc_mapped_kb"),
            "rss_end_of_load_kb": a.get("rss_kb"),
            "rss_after_idle_kb": b.get("rss_kb"),
        }

    def to_manifest(self) -> dict:
        cost = sorted(self.cost_ms)
        return {
            "source": "servers/shims/alloc_stats.c, preloaded after the allocator",
            "api": self.api,
            "library": self.library,
            "figures": [f"alloc_{k}_kb" for k in FIGURES],
            "readings": self.readings,
            "returned_after_load": self.returned(),
            "reading_wall_ms_median": cost[len(cost) // 2] if cost else None,
            "errors": self.errors,
        }

    def warnings(self) -> list[str]:
        out = [f"allocator statistics: {e}" for e in self.errors]
        for r in self.readings:
            for p in r.get("inconsistent") or ():
                out.append(f"allocator figures at {r['phase']} ({r['at']}): {p}")
        return out
