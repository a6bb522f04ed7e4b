"""The one owner of the THP sysfs files: their path and how a choice file is read.

Everything that reads or sets the system THP mode uses these: the host metadata
(collectors/host.py), the probe (collectors/thp_probe.py), the THP controller (suites/runner/thp.py) and
the MongoDB family's advice (servers/mongodb.py). Kept in collectors/, which imports nothing of
ours, so every layer may use it.
"""

from __future__ import annotations

import re
import signal
import threading
from contextlib import contextmanager
from pathlib import Path

SYSFS = Path("/sys/kernel/mm/transparent_hugepage")


MODES = ("enabled", "defrag")  # the two system-wide choice files mallocsweep reads and sets


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
