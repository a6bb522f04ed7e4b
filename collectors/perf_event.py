"""perf_event_open(2) counting events through ctypes: no `perf` binary, no parsing its output.

Only counting mode is used (no sampling, no ring buffer), so an event costs a few instructions per
occurrence in the kernel and a read(2) of 24 bytes when we want its value. With `inherit=True` the
kernel clones the event into every thread and child the target creates afterwards and folds an
exiting thread's count into the parent event, so one read gives the whole-process total including
threads that have already exited (`/proc/PID/task/*` cannot: exited threads vanish from it).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from pathlib import Path

from collectors.errors import CollectorError, ProcessGone

PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
PERF_COUNT_SW_CONTEXT_SWITCHES = 3

PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1

# perf_event_attr flag bits (include/uapi/linux/perf_event.h, the bitfield after read_format).
_FLAG_DISABLED = 1 << 0
_FLAG_INHERIT = 1 << 1
_FLAG_ENABLE_ON_EXEC = 1 << 12

PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_SET_FILTER = 0x40082406  # _IOW('$', 6, char *) on 64-bit

PERF_FLAG_FD_CLOEXEC = 1 << 3

_SYSCALL_NR = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}

TRACEFS_ROOTS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


class PerfUnavailable(CollectorError):
    """perf_event_open refused (permissions, paranoid level, missing tracefs); the message says why."""


class _Attr(ctypes.Structure):
    # PERF_ATTR_SIZE_VER0 (64 bytes) holds every field counting needs; newer kernels accept it.
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall_nr() -> int:
    nr = _SYSCALL_NR.get(platform.machine())
    if nr is None:
        raise PerfUnavailable(f"perf_event_open: unknown syscall number on {platform.machine()}")
    return nr


def paranoid_level() -> int | None:
    """kernel.perf_event_paranoid, or None when it cannot be read."""
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def _find_tracepoint(subsystem: str, name: str) -> Path | None:
    for root in TRACEFS_ROOTS:
        d = Path(root) / "events" / subsystem / name
        if (d / "id").is_file():
            return d
    return None


def mount_tracefs(target: str = TRACEFS_ROOTS[0]) -> str | None:
    """Mount tracefs at `target` the way perf(1) does when it finds none; None or why not.

    Tracepoint ids exist only in tracefs. Machines without systemd (containers, small VMs) often
    boot with it unmounted. Mounting it changes no kernel behaviour, it only exposes the tracing
    interface, so like perf we leave it mounted (another tool may start using it meanwhile).
    """
    if os.geteuid() != 0:
        return "not root (mount -t tracefs nodev /sys/kernel/tracing needs root)"
    if not Path(target).is_dir():
        return f"{target} does not exist (kernel without CONFIG_TRACING?)"
    src = target.encode()
    _libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
    if _libc.mount(b"nodev", src, b"tracefs", 0, None) != 0:
        return f"mount tracefs on {target}: {os.strerror(ctypes.get_errno())}"
    return None


def tracepoint_dir(subsystem: str, name: str, *, mount: bool = True) -> Path:
    """The tracefs directory of a tracepoint (its `id` and `format` files).

    With `mount`, a missing tracefs is mounted first (root only), as perf(1) does.
    """
    found = _find_tracepoint(subsystem, name)
    why = "tracefs not mounted or not readable"
    if found is None and mount:
        why = mount_tracefs() or why
        found = _find_tracepoint(subsystem, name)
    if found is not None:
        return found
    raise PerfUnavailable(
        f"tracepoint {subsystem}:{name} not found under {' or '.join(TRACEFS_ROOTS)} "
        f"({why}; as root: mount -t tracefs nodev {TRACEFS_ROOTS[0]})"
    )


class Counter:
    """One counting perf event on a task (and, with inherit, on everything it creates)."""

    def __init__(
        self,
        pid: int,
        type_: int,
        config: int,
        *,
        inherit: bool = True,
        enable_on_exec: bool = False,
        filter_: str | None = None,
        name: str = "",
    ):
        self.name = name or f"{type_}:{config}"
        attr = _Attr()
        attr.type = type_
        attr.size = ctypes.sizeof(_Attr)
        attr.config = config
        attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
        flags = 0
        if inherit:
            flags |= _FLAG_INHERIT
        if enable_on_exec:
            # Counting starts at the target's next execve: the gate shell is not counted, and the
            # filter below is in place before the first event.
            flags |= _FLAG_DISABLED | _FLAG_ENABLE_ON_EXEC
        elif filter_ is not None:
            flags |= _FLAG_DISABLED  # enabled only once the filter is set
        attr.flags = flags
        fd = _libc.syscall(_syscall_nr(), ctypes.byref(attr), pid, -1, -1, PERF_FLAG_FD_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            if err == errno.ESRCH:
                raise ProcessGone(pid, f"perf_event_open {self.name}")
            raise PerfUnavailable(
                f"perf_event_open({self.name}) on pid {pid}: {os.strerror(err)} "
                f"(kernel.perf_event_paranoid={paranoid_level()}; root or paranoid<=-1 is needed "
                "for tracepoints, <=1 for software events of your own processes)"
            )
        self.fd = int(fd)
        try:
            if filter_ is not None:
                buf = ctypes.create_string_buffer(filter_.encode())
                if _libc.ioctl(self.fd, PERF_EVENT_IOC_SET_FILTER, buf) != 0:
                    err = ctypes.get_errno()
                    raise PerfUnavailable(
                        f"perf filter {filter_!r} on {self.name} rejected: {os.strerror(err)}"
                    )
                if not enable_on_exec and _libc.ioctl(self.fd, PERF_EVENT_IOC_ENABLE, 0) != 0:
                    err = ctypes.get_errno()
                    raise PerfUnavailable(f"enabling {self.name}: {os.strerror(err)}")
        except BaseException:
            os.close(self.fd)
            raise

    def read(self) -> tuple[int, int, int]:
        """(count, time_enabled_ns, time_running_ns); time_enabled is 0 until enabled (exec)."""
        data = os.read(self.fd, 24)
        if len(data) != 24:
            raise CollectorError(f"perf counter {self.name}: short read ({len(data)} bytes)")
        return struct.unpack("QQQ", data)

    @property
    def value(self) -> int:
        return self.read()[0]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):  # pragma: no cover - best effort when a caller forgot close()
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
