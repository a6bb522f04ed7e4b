"""Where mallocsweep keeps what it can rebuild: built shims, prepared datasets, ELF readings.

One base for all of them: $MALLOCSWEEP_CACHE, else $XDG_CACHE_HOME/mallocsweep, else
~/.cache/mallocsweep. Deleting it costs only time.
"""

from __future__ import annotations

import os
from pathlib import Path

from rundir.format import OWNER_MARKER


def cache_base() -> Path:
    base = os.environ.get("MALLOCSWEEP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mallocsweep"
    )
    return Path(base)


def owned_subdir(name: str) -> Path:
    """cache_base()/name, created and marked as ours (rundir OWNER_MARKER): a dataset cache whose
    root is the same base (MALLOCSWEEP_CACHE pointing at it) accepts it as mallocsweep's."""

    path = cache_base() / name
    path.mkdir(parents=True, exist_ok=True)
    marker = path / OWNER_MARKER
    if not marker.is_file():
        marker.write_text(f"mallocsweep cache: {name}\n")
    return path
