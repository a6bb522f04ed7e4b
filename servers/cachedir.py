"""Where mallocsweep keeps what it can rebuild: built shims, prepared datasets, ELF readings.

One base for all of them: $MALLOCSWEEP_CACHE, else $XDG_CACHE_HOME/mallocsweep, else
~/.cache/mallocsweep. Deleting it costs only time.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_base() -> Path:
    base = os.environ.get("MALLOCSWEEP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "mallocsweep"
    )
    return Path(base)
