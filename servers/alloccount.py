"""The allocator's exposure: how many calls the server makes into it (servers/shims/alloc_count.c).

The counting shim is preloaded FIRST, ahead of the allocator under test: it wins the binding of
the malloc family and of operator new/delete and forwards every call to the next definition
(dlsym RTLD_NEXT), the allocator's (or libc's, for the glibc arm). Which allocator serves the
calls is unchanged, and the binding proof (servers/binding.py) follows the calls through the shim
to the library they reach.

Its sums are read through the alloc_stats shim's FIFO (servers/allocstats.py), in the same answer
as the allocator's own figures: the answer's "calls" (per kind), "bytes_asked" and "count_blocks"
(threads enrolled, exited ones included). Only the counts are read there; this module makes the
library ready for a server life and names what the kinds mean.

In a server root the work dir is bind-mounted at the same path, so the library is copied there,
as alloc_stats is; it links only symbols of glibc <= 2.34.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from servers.shipped import shipped
from servers.thpshim import build_shim

SOURCE = shipped("servers", "shims", "alloc_count.c")
ENV = "MALLOCSWEEP_ALLOC_COUNT"  # "1": count; otherwise the shim only forwards
LIB_NAME = "ms-alloc-count.so"
# The shim's kinds of call (alloc_count.c mallocsweep_count_kinds). An allocation call is any call
# that asks the allocator for memory; a free call is any that gives it back.
ALLOC_KINDS = (
    "malloc", "calloc", "realloc", "memalign", "posix_memalign", "aligned_alloc", "valloc",
    "pvalloc", "new",
)  # fmt: skip
FREE_KINDS = ("free", "delete")


def alloc_count_library(cache: Path | None = None) -> Path:
    return build_shim(SOURCE, "exposure.count_calls", libs=("-ldl", "-lpthread"), cache=cache)


def prepare(workdir: Path) -> tuple[str, dict[str, str]]:
    """Copy the library into the work dir; (path to preload first, env for the server)."""
    workdir = Path(workdir).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    lib = workdir / LIB_NAME
    shutil.copyfile(alloc_count_library(), lib)
    return str(lib), {ENV: "1"}


def totals(reading: dict) -> dict | None:
    """alloc_calls, free_calls, alloc_bytes (cumulative since the server started) of one
    alloc_stats answer; None when the counting shim was not loaded."""
    calls = reading.get("calls")
    if not isinstance(calls, dict):
        return None
    return {
        "alloc_calls": sum(int(calls.get(k) or 0) for k in ALLOC_KINDS),
        "free_calls": sum(int(calls.get(k) or 0) for k in FREE_KINDS),
        "alloc_bytes": int(reading.get("bytes_asked") or 0),
        "count_blocks": reading.get("count_blocks"),
    }
