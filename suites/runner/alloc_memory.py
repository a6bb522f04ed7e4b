"""The allocator's own accounting over one cell: readings at phase boundaries and in the idle phase.

Each reading pairs the allocator's figures (servers.allocstats, read inside the server) with the
process's RSS, swap and thread count read from /proc right after, so "overhead" (RSS / in use)
and the consistency check compare figures of one moment:
    in_use <= RSS + swap   (what the server holds through malloc is part of what is resident)
A failed check is kept in the reading and becomes a cell warning. The allocator's "committed"
figure is not checked against RSS: it counts pages the kernel never backed (untouched parts of
large buffers), so it can exceed RSS by design; how far is kept as committed_over_rss_kb.

A reading that fails (the shim did not answer) is recorded with its error; the cell goes on,
its columns stay empty.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rundir.derive.alloc import level_columns
from servers import alloccount, interrupts
from servers.allocstats import FIGURES, AllocStats, to_kb
from servers.errors import ServerError


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
    rss, swap, in_use = r.get("rss_kb"), r.get("swap_kb") or 0, r.get("alloc_in_use_kb")
    if rss is None or in_use is None:
        return []
    # 1% + 64 kB of slack: the two reads are a few milliseconds apart while the server runs.
    slack = max(64, rss // 100)
    if in_use > rss + swap + slack:
        return [f"in use {in_use} kB > RSS {rss} kB + swap {swap} kB"]
    return []


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
        r["read_us"] = raw.get("read_us")  # in the server, wall (lock and CPU waits included)
        r["read_cpu_us"] = raw.get("read_cpu_us")  # in the server, the reading's own CPU
        r["detail"] = raw.get("detail")
        # the exposure counter's sums since the server started (absent: it was not loaded)
        r |= alloccount.totals(raw) or {}
        committed = r.get("alloc_committed_kb")
        if committed is not None and r["rss_kb"] is not None:
            r["committed_over_rss_kb"] = max(0, committed - r["rss_kb"])
        problems = consistency(r)
        if problems:
            r["inconsistent"] = problems
        self.readings.append(r)
        return r

    def idle(self, seconds: float, every_s: float, stop: threading.Event | None = None) -> None:
        """The idle phase: no client; a reading every `every_s` and one at `seconds`.

        The readings are due at fixed times from the start (0, every_s, 2*every_s, ..., seconds),
        so their number does not depend on how late a busy machine wakes us: a late reading is
        still taken, never skipped."""
        start = time.monotonic()
        last = max(math.ceil(seconds / every_s), 1) if seconds > 0 else 0
        for k in range(last + 1):
            self.read("idle", "idle")
            if k == last:
                return
            wait = max(start + min((k + 1) * every_s, seconds) - time.monotonic(), 0.0)
            if stop is not None:
                if stop.wait(wait):
                    return
            else:
                interrupts.sleep(wait)  # a signal ends the idle phase at once (Interrupted)

    def level_columns(self, phase: str) -> dict:
        """The results.csv columns of level `phase`: its end-of-level reading (empty if none)."""
        return level_columns(self.readings, phase)

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
