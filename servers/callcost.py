"""What one call into each installed allocator costs here: the bound of the exposure words.

servers/shims/call_cost.c (built on first use, like the shims) times malloc+free pairs of
server-typical sizes on 1 thread and on as many threads as the machine has CPUs, under each
allocator preloaded as a server would be (its library and environment), in two classes of size:
small (16 B to 8 kB) and large (32 kB to 1 MB: sort and join buffers, where allocators differ
most). The bound of a class is the largest difference in per-call cost between two installed
allocators at either thread count: how much more a call can cost under one allocator than under
another on this machine. A server
whose calls per query are so few that even that difference could not move its CPU per query by
the effect asked for cannot have its throughput changed by the allocator (analysis/exposure.py).

Each allocator build is measured once per machine: the result is cached per build (the library's
path, size and mtime, its environment), program version and CPU model, in the cache directory.
It is a measurement of CPU time per call (the threads' own CPU clock, the best of 5 runs), so a
busy machine slows it less than wall time would; it is recorded in the run with the load average
at the time, and make bench prints the table. CPU time is not immune to load (caches and the
memory bus are shared; a measurement of this table at load average 130-160 was kept for days), so
an entry measured while the machine was busy (its 1-minute load average above the CPU count) is
measured again the first time the machine is not, and replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from servers.allocators import Allocator
from servers.cachedir import owned_subdir
from servers.errors import ServerError
from servers.shipped import shipped
from servers.thpshim import compile_once

SOURCE = shipped("servers", "shims", "call_cost.c")
ITERATIONS = {"small": 200_000, "large": 20_000}  # pairs per thread and run: a few ms of CPU
REPEATS = 5
CLASSES = ("small", "large")
LARGE_MIN = 32 * 1024  # the smallest size of the large class (call_cost.c)


def program(cache: Path | None = None) -> Path:
    return compile_once(SOURCE, "exposure.call_cost", ("-O2", "-pthread"), cache=cache)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _key(alloc: Allocator, threads: tuple[int, ...]) -> str:
    lib = alloc.library
    ident = ""
    if lib:
        try:
            st = os.stat(lib)
            ident = f"{os.path.realpath(lib)}:{st.st_size}:{st.st_mtime_ns}"
        except OSError as e:
            raise ServerError(f"{alloc.name}: cannot read {lib}: {e.strerror}") from None
    parts = [
        alloc.name,
        ident,
        json.dumps(alloc.env, sort_keys=True),
        hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16],
        _cpu_model(),
        ",".join(map(str, threads)),
        json.dumps(ITERATIONS, sort_keys=True),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def measure(alloc: Allocator, threads: int, size_class: str = "small") -> float:
    """ns per call (a malloc or a free) under `alloc`, `threads` threads at once."""
    env = alloc.launch_env({k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    return measure_env(env, threads, size_class, alloc.name)


def measure_env(env: dict, threads: int, size_class: str = "small", name: str = "") -> float:
    """ns per call with the process environment `env` (its LD_PRELOAD decides who serves)."""
    name = name or env.get("LD_PRELOAD") or "glibc"
    argv = [str(program()), str(threads), str(ITERATIONS[size_class]), str(REPEATS), size_class]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    fields = r.stdout.split()
    if r.returncode != 0 or len(fields) != 3 or fields[0] != "ns_per_call":
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise ServerError(f"call cost of {name}: the microbenchmark failed ({last})")
    return float(fields[2])


def cost_of(alloc: Allocator, threads: tuple[int, ...]) -> dict:
    """{"ns_per_call": {"small": {"1": ns, "N": ns}, "large": {...}}, ...} for `alloc`, from the
    cache or measured now (and cached)."""
    cache = owned_subdir("call-cost") / f"{_key(alloc, threads)}.json"
    if cache.is_file():
        try:
            kept = json.loads(cache.read_text())
        except (OSError, ValueError):
            kept = None  # a damaged entry is measured again
        if kept is not None and not (_busy(kept.get("load_avg")) and not _busy(os.getloadavg())):
            return kept
    got = {
        "allocator": alloc.name,
        "library": alloc.library,
        "ns_per_call": {
            c: {str(t): round(measure(alloc, t, c), 3) for t in threads} for c in CLASSES
        },
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    tmp = cache.with_name(f"{cache.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(got))
    os.replace(tmp, cache)
    return got


def _busy(load_avg) -> bool:
    """Was (is) the machine busy: its 1-minute load average above the CPUs it has."""
    try:
        return float(load_avg[0]) > (os.cpu_count() or 1)
    except (TypeError, ValueError, IndexError):
        return False


def bound(table: list[dict], size_class: str = "small") -> dict | None:
    """The largest per-call cost difference between two allocators of `table` at one thread
    count, for one class of size: {"ns": d, "threads": t, "cheapest": name, "dearest": name};
    None under two allocators."""
    if len(table) < 2:
        return None
    best = None
    per = [(row["allocator"], row["ns_per_call"].get(size_class) or {}) for row in table]
    for t in sorted({t for _, ns in per for t in ns}, key=int):
        have = [(ns[t], a) for a, ns in per if t in ns]
        if len(have) < 2:
            continue
        lo, hi = min(have), max(have)
        d = round(hi[0] - lo[0], 3)
        if best is None or d > best["ns"]:
            best = {"ns": d, "threads": int(t), "cheapest": lo[1], "dearest": hi[1]}
    return best


def installed_table(allocators: list[Allocator]) -> dict:
    """The per-call cost of each usable allocator of `allocators` (the core ones installed
    here) on 1 and all CPUs' threads, small and large sizes, and the bound of each class: what
    a run records (manifest call_cost)."""
    threads = tuple(sorted({1, max(os.cpu_count() or 1, 2)}))
    table = [cost_of(a, threads) for a in allocators if a.usable]
    return {
        "source": "servers/shims/call_cost.c: malloc+free pairs, small 16 B-8 kB and large "
        f"32 kB-1 MB, thread CPU time, best of {REPEATS} runs",
        "threads": list(threads),
        "table": table,
        "bound": {c: bound(table, c) for c in CLASSES},
        "large_min_bytes": LARGE_MIN,
    }
