"""The one owner of the THP sysfs files: their path and how a choice file is read.

Everything that reads or sets the system THP mode uses these: the host metadata
(collectors/host.py), the probe (collectors/thp_probe.py), the THP controller (suites/runner/thp.py) and
the MongoDB family's advice (servers/mongodb.py). Kept in collectors/, which imports nothing of
ours, so every layer may use it.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from contextlib import contextmanager
from pathlib import Path

SYSFS = Path("/sys/kernel/mm/transparent_hugepage")


MODES = ("enabled", "defrag")  # the two system-wide choice files mallocsweep reads and sets
# khugepaged's setting a hugepage study may set (MongoDB 8 wants 0): how many empty small pages a
# huge page it collapses may hold (0 = collapse only fully used ranges).
MAX_PTES_NONE = "khugepaged/max_ptes_none"


def parse_choice(text: str | None) -> str | None:
    """The selected value of a sysfs choice line: "always [madvise] never" -> "madvise"."""
    if not text:
        return None
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip() or None


def read_choice(path: Path) -> str | None:
    """The selected value of a sysfs choice file; None when it cannot be read."""
    try:
        return parse_choice(path.read_text())
    except OSError:
        return None


def choices(path: Path) -> tuple[str, ...]:
    """Every value a sysfs choice file offers ("always [madvise] never" -> the three); () when it
    cannot be read. What this kernel offers is read here, never assumed."""
    try:
        text = path.read_text()
    except OSError:
        return ()
    return tuple(w.strip("[]") for w in text.split())


def offered(sysfs: Path = SYSFS) -> dict[str, tuple[str, ...]]:
    """{"enabled": (...), "defrag": (...)}: the modes this kernel offers."""
    return {name: choices(Path(sysfs) / name) for name in MODES}


def read_int(path: Path) -> int | None:
    """A sysfs file holding one integer; None when it cannot be read."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def max_ptes_none(sysfs: Path = SYSFS) -> int | None:
    """khugepaged's max_ptes_none now; None where the kernel has no khugepaged."""
    return read_int(Path(sysfs) / MAX_PTES_NONE)


def max_ptes_none_limit(sysfs: Path = SYSFS) -> int | None:
    """The largest max_ptes_none this kernel takes: a huge page's small pages minus one
    (hpage_pmd_size / page size - 1: 511 with 4 kB pages and 2 MB huge pages); None without
    khugepaged or hpage_pmd_size."""
    pmd = read_int(Path(sysfs) / "hpage_pmd_size")
    if pmd is None or max_ptes_none(sysfs) is None:
        return None
    return pmd // os.sysconf("SC_PAGE_SIZE") - 1


def system_modes(sysfs: Path = SYSFS) -> dict[str, str | None]:
    """The system THP modes now: {"enabled", "defrag"} (None where unreadable)."""
    return {name: read_choice(Path(sysfs) / name) for name in MODES}


@contextmanager
def signals_held():
    """Hold SIGINT/SIGTERM until the block ends, then deliver them to the usual handlers.

    Blocking them in this thread's mask is not enough in Python: a signal delivered to another
    thread still runs the Python handler in the main thread at the next bytecode. So in the main
    thread the handlers are also swapped for ones that only note the signal; noted signals are
    raised again, in order, once the old handlers and mask are back."""
    sigs = (signal.SIGINT, signal.SIGTERM)
    noted: list[int] = []
    old_handlers = {}
    main = threading.current_thread() is threading.main_thread()
    if main:
        for s in sigs:
            try:
                old_handlers[s] = signal.signal(s, lambda signum, frame: noted.append(signum))
            except (ValueError, OSError):
                pass
    try:
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(sigs))
    except (AttributeError, OSError, ValueError):
        old_mask = None
    try:
        yield
    finally:
        for s, h in old_handlers.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)  # blocked ones arrive here
        for s in dict.fromkeys(noted):
            signal.raise_signal(s)
