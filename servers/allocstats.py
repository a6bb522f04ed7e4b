"""The allocator's own accounting, read from inside a running server (servers/shims/alloc_stats.c).

The shim is preloaded after the allocator; one thread of it waits on a FIFO in the cell's work
dir. A reading writes "SEQ PATH" to the FIFO and waits for PATH, which the shim writes whole
(rename) with the figures of the allocator that serves malloc:

    in_use    bytes the application holds (jemalloc stats.allocated minus its thread caches;
              tcmalloc generic.current_allocated_bytes; glibc mallinfo2 uordblks + hblkhd)
    cached    committed - in_use: what the allocator holds and the server does not (free spans,
              thread and central caches, dirty pages, metadata; glibc: fordblks)
    mapped    address space it obtained (jemalloc stats.mapped; tcmalloc heap_size + metadata;
              glibc arenas' system memory + mmapped chunks)
    committed what it has not given back (jemalloc stats.resident; tcmalloc total_physical_bytes;
              glibc = mapped). NOT what is resident: the kernel backs only pages that were
              touched, and a server that mallocs a 2 MB buffer and uses 8 kB of it leaves the
              rest unbacked. Measured here: after 256 clients, jemalloc said 441 MB and tcmalloc
              372 MB with RSS at 306 and 277 MB. So in use and cached are compared with RSS (the
              kernel's figure) only through overhead = RSS / in use.
mimalloc's release build and TBB malloc keep no usable totals: their columns stay empty (None),
with what they do say in `detail`.

In a server root the work dir is bind-mounted at the same path, so the library is copied there:
the path LD_PRELOAD names is then valid inside the root as well. Only symbols of glibc <= 2.34 are
linked, so the host's build loads on a root's newer glibc.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

from servers.errors import ServerError
from servers.shipped import shipped
from servers.thpshim import build_shim

SOURCE = shipped("servers", "shims", "alloc_stats.c")
FIFO_ENV = "MALLOCSWEEP_ALLOC_FIFO"
_LIB_NAME = "ms-alloc-stats.so"
_FIFO_NAME = "alloc-stats.fifo"
# The figures that become columns (kB), in this order.
FIGURES = ("in_use", "cached", "mapped", "committed")
LIBS = ("-ldl", "-lpthread")  # what the shim links (a kit prebuilds it with the same)


def alloc_stats_library(cache: Path | None = None) -> Path:
    return build_shim(SOURCE, "memory.alloc_stats", libs=LIBS, cache=cache)


class AllocStats:
    """The request side, for one server life whose work dir is `workdir`."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir).absolute()
        self.fifo = self.workdir / _FIFO_NAME
        self.library = self.workdir / _LIB_NAME
        self._seq = 0

    def prepare(self) -> tuple[str, dict[str, str]]:
        """Put the library and the FIFO in the work dir; (path to preload, env for the server)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(alloc_stats_library(), self.library)
        if self.fifo.exists() or self.fifo.is_symlink():
            if not stat.S_ISFIFO(self.fifo.lstat().st_mode):
                raise ServerError(f"{self.fifo} exists and is not our FIFO; refusing to use it")
        else:
            os.mkfifo(self.fifo, 0o600)
        return str(self.library), {FIFO_ENV: str(self.fifo)}

    def read(self, timeout_s: float = 10.0) -> dict:
        """One reading: the shim's JSON plus `wall_ms` (request to answer, our side).

        ServerError when the shim does not answer in time (not loaded, the server gone or stuck).
        """
        self._seq += 1
        seq = self._seq
        answer = self.workdir / f"alloc-stats.{seq}.json"
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        delay = 0.002
        # O_NONBLOCK: ENXIO while no reader has the FIFO open (the shim's thread is not yet, or
        # no longer, waiting); retried until it is, never blocking past the deadline.
        while True:
            try:
                fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                break
            except OSError as e:
                if e.errno != 6 or time.monotonic() >= deadline:  # 6: ENXIO
                    raise ServerError(
                        f"allocator statistics: the shim in the server is not listening on "
                        f"{self.fifo} ({e.strerror})"
                    ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        try:
            os.write(fd, f"{seq} {answer}\n".encode())
        finally:
            os.close(fd)
        delay = 0.002
        while not answer.exists():
            if time.monotonic() >= deadline:
                raise ServerError(
                    f"allocator statistics: no answer within {timeout_s:g}s to request {seq}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        try:
            data = json.loads(answer.read_text())
        except (OSError, ValueError) as e:
            raise ServerError(f"allocator statistics: unreadable answer {answer}: {e}") from None
        finally:
            answer.unlink(missing_ok=True)
        data["wall_ms"] = round((time.monotonic() - t0) * 1000, 3)
        return data

    def close(self) -> None:
        """Remove the FIFO: the shim's thread, if still waiting, ends at its next open."""
        self.fifo.unlink(missing_ok=True)


def to_kb(reading: dict) -> dict:
    """alloc_in_use_kb, alloc_cached_kb, alloc_mapped_kb, alloc_committed_kb of one reading."""
    out = {}
    for k in FIGURES:
        v = reading.get(k)
        out[f"alloc_{k}_kb"] = None if v is None else round(v / 1024)
    return out
