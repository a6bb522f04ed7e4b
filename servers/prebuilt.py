"""Every program the tool compiles from its shipped C sources while it runs, in one list.

The preload shims and the call-cost program are built on first use into the shims cache
(servers.thpshim.compile_once), which needs a C compiler on the machine. A kit has none on its
target, so it builds every one of them in advance into its root's cache, under the names the tool
asks for; a source added to the tool and missing here would fail on the target only ("needs a C
compiler"), which is why the list is one and a test checks it covers servers/shims/*.c.
(The exec helper is built apart: it goes into the venv's libexec, not the cache.)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from servers import alloccount, allocstats, callcost, thpshim

# (its source, its build): each build takes the cache directory to build into (None: the user's
# cache) and returns the file.
RUNTIME: tuple[tuple[Path, Callable[[Path | None], Path]], ...] = (
    (thpshim.SOURCE, thpshim.keep_thp_library),
    (allocstats.SOURCE, allocstats.alloc_stats_library),
    (alloccount.SOURCE, alloccount.alloc_count_library),
    (callcost.SOURCE, callcost.program),
)
SOURCES = tuple(source for source, _ in RUNTIME)
RUNTIME_BUILDS = tuple(build for _, build in RUNTIME)


def build_all(cache: Path) -> list[Path]:
    """Build every runtime program into `cache`; the files built."""
    return [build(cache) for build in RUNTIME_BUILDS]
