"""The one owner of the THP sysfs files: their path and how a choice file is read.

Everything that reads or sets the system THP mode uses these: the host metadata
(collectors/host.py), the probe (collectors/thp_probe.py), the THP controller (suites/runner/thp.py) and
the MongoDB family's advice (suites/families/mongodb/server.py). Kept in collectors/, which imports nothing of
ours, so every layer may use it.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

SYSFS = Path("/sys/kernel/mm/transparent_hugepage")
# Held by whichever process of ours has a system setting changed (THP, khugepaged, huge pages):
# the runner while a cell runs under its setting, the THP probe while it forces madvise.
SYSTEM_LOCK = Path("/run/mallocsweep/system.lock")


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


class MachineLock:
    """The machine-wide lock (SYSTEM_LOCK, flock), counted per process: the first holder in a
    process takes it, the last release gives it up. Two runs of ours on one machine must not both
    change the system: the second would measure the first's setting, record it as "the original"
    and put it back after the first had restored the real one."""

    def __init__(self, path: Path = SYSTEM_LOCK):
        self.path = path
        self.fd: int | None = None
        self.holders = 0

    def acquire(self, wait: Callable[[float], None] = time.sleep, blocking: bool = True) -> bool:
        """Hold the lock (waiting for another process's turn, said once, unless not `blocking`:
        then False at once when another process holds it). True also where /run is not ours:
        then no other run of ours can change the system either."""
        if self.fd is None:
            fd = self._open()
            if fd is not None and not self._lock(fd, wait, blocking):
                os.close(fd)
                return False
            self.fd = fd
        self.holders += 1
        return True

    def release(self) -> None:
        self.holders = max(0, self.holders - 1)
        if self.holders == 0 and self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
            os.close(self.fd)  # closing releases the flock
            self.fd = None

    def _open(self) -> int | None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None

    @staticmethod
    def _lock(fd: int, wait: Callable[[float], None], blocking: bool) -> bool:
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if not blocking:
                    return False
                if not said:
                    holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                    print(
                        f"mallocsweep: waiting for another run (pid {holder or '?'}) to give back "
                        "the THP / huge-page setting of its cell",
                        file=sys.stderr,
                    )
                    said = True
                try:
                    wait(0.5)
                except BaseException:
                    os.close(fd)
                    raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return True


MACHINE_LOCK = MachineLock()  # one per process
