"""Careful /proc readers with an injectable root, so tests run on fixture trees.

Rules (after psutil's _pslinux.py):
- each file is opened and read once per call, so one call's figures are from one moment;
- /proc/PID/stat is split after the LAST ')': the comm field may hold spaces and parentheses;
- a process that is gone raises collectors.errors.ProcessGone, never a bare FileNotFoundError;
- fields a kernel or a zombie does not provide come back as None, not 0.

Only cheap files are read here by default: status, stat and statm are generated from counters.
smaps_rollup walks the target's page tables under its mmap lock (129 ms on 12 GB of 4 KB pages)
and must stay out of any 1 Hz loop; callers decide when to pay for it. smaps (per mapping) walks
the same tables and prints one block per mapping: dearer still. smaps() is its only parser; the
collectors read it once per phase boundary (collectors.sampler.ProcessReader) and derive from that
one read the parts (collectors.smaps) and the hugepage reading (collectors.hugepages); `make
bench` measures a read.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from collectors.errors import CollectorError, ProcessGone

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024

_GONE_ERRNOS = (errno.ENOENT, errno.ESRCH)


@dataclass(frozen=True)
class Status:
    """The /proc/PID/status fields the collectors use (kB for memory), plus every raw line."""

    name: str
    state: str
    vm_rss_kb: int | None
    vm_size_kb: int | None
    vm_hwm_kb: int | None
    rss_anon_kb: int | None
    threads: int | None
    # The main thread's counters only (not the process's): see collectors.ctxsw.
    voluntary_ctxt_switches: int | None
    nonvoluntary_ctxt_switches: int | None
    thp_enabled: int | None  # 0 when the process disabled THP for itself (prctl), None if unknown
    raw: dict[str, str] = field(repr=False, default_factory=dict)


@dataclass(frozen=True)
class Stat:
    """/proc/PID/stat for the whole thread group (utime/stime include exited threads)."""

    pid: int
    comm: str
    state: str
    ppid: int
    pgrp: int
    minflt: int
    majflt: int
    utime_s: float
    stime_s: float
    num_threads: int
    starttime_ticks: int  # since boot; with the pid, identifies this process across pid reuse
    vsize_kb: int
    rss_kb: int


@dataclass(frozen=True)
class Vma:
    """One mapping of /proc/PID/smaps: its address range, permissions, name (a file path,
    "[heap]", "[stack]", "anon_inode:[io_uring]", ... or "" for anonymous memory), its kB figures
    (Rss, Swap, AnonHugePages, Private_Hugetlb, ...; as many as the kernel prints) and VmFlags."""

    start: int
    end: int
    perms: str  # "rw-p", "---p", "r-xp", "rw-s" ...
    path: str
    kb: dict[str, int]
    flags: frozenset[str]

    @property
    def size_kb(self) -> int:
        return (self.end - self.start) // 1024

    @property
    def hugetlb(self) -> bool:
        """Backed by explicit huge pages (vm.nr_hugepages): VmFlags "ht"."""
        return "ht" in self.flags

    @property
    def anonymous(self) -> bool:
        """No file behind it: no name, or the hidden hugetlbfs file an anonymous hugetlb mapping
        is named after ("/anon_hugepage (deleted)"). [heap] and shared memory are the callers'
        to decide."""
        return not self.path or self.path.startswith("/anon_hugepage")


@dataclass(frozen=True)
class Statm:
    """/proc/PID/statm in kB."""

    size_kb: int
    resident_kb: int
    shared_kb: int
    text_kb: int
    data_kb: int


class ProcFS:
    """Readers over one procfs root ("/proc" in production, a fixture directory in tests)."""

    def __init__(self, root: str | os.PathLike = "/proc"):
        self.root = Path(root)

    # -- raw access --------------------------------------------------------------------------
    def _read(self, pid: int | None, name: str) -> str:
        path = self.root / name if pid is None else self.root / str(pid) / name
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            if pid is not None:
                raise ProcessGone(pid, name) from None
            raise CollectorError(
                f"{path} does not exist (is procfs mounted at {self.root}?)"
            ) from None
        except ProcessLookupError:
            raise ProcessGone(pid or 0, name) from None
        except OSError as e:
            if pid is not None and e.errno in _GONE_ERRNOS:
                raise ProcessGone(pid, name) from None
            raise CollectorError(f"reading {path}: {e.strerror}") from None
        return data.decode("utf-8", "replace")

    # -- per process --------------------------------------------------------------------------
    def status(self, pid: int) -> Status:
        text = self._read(pid, "status")
        raw: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                raw[key] = value.strip()
        if not raw:
            raise ProcessGone(pid, "status (empty)")

        def kb(key: str) -> int | None:
            v = raw.get(key)
            return int(v.split()[0]) if v else None

        def num(key: str) -> int | None:
            v = raw.get(key)
            return int(v) if v not in (None, "") else None

        return Status(
            name=raw.get("Name", ""),
            state=(raw.get("State") or "?")[:1],
            vm_rss_kb=kb("VmRSS"),
            vm_size_kb=kb("VmSize"),
            vm_hwm_kb=kb("VmHWM"),
            rss_anon_kb=kb("RssAnon"),
            threads=num("Threads"),
            voluntary_ctxt_switches=num("voluntary_ctxt_switches"),
            nonvoluntary_ctxt_switches=num("nonvoluntary_ctxt_switches"),
            thp_enabled=num("THP_enabled"),
            raw=raw,
        )

    def stat(self, pid: int) -> Stat:
        text = self._read(pid, "stat")
        lpar, rpar = text.find("("), text.rfind(")")
        if lpar < 0 or rpar < lpar:
            raise CollectorError(f"{self.root}/{pid}/stat: no '(comm)' field in {text[:80]!r}")
        comm = text[lpar + 1 : rpar]
        # Fields after the comm, numbered from 3 (state) as in proc(5).
        f = text[rpar + 2 :].split()
        if len(f) < 22:
            raise CollectorError(f"{self.root}/{pid}/stat: {len(f) + 2} fields, expected >= 24")

        def field_(n: int) -> int:
            return int(f[n - 3])

        return Stat(
            pid=int(text[:lpar].strip()),
            comm=comm,
            state=f[0],
            ppid=field_(4),
            pgrp=field_(5),
            minflt=field_(10),
            majflt=field_(12),
            utime_s=field_(14) / CLK_TCK,
            stime_s=field_(15) / CLK_TCK,
            num_threads=field_(20),
            starttime_ticks=field_(22),
            vsize_kb=field_(23) // 1024,
            rss_kb=field_(24) * PAGE_KB,
        )

    def statm(self, pid: int) -> Statm:
        f = self._read(pid, "statm").split()
        if len(f) < 6:
            raise CollectorError(f"{self.root}/{pid}/statm: expected 7 fields, got {f!r}")
        size, resident, shared, text, _lib, data = (int(x) * PAGE_KB for x in f[:6])
        return Statm(size, resident, shared, text, data)

    def smaps_rollup(self, pid: int) -> dict[str, int]:
        """kB figures (Rss, Pss, Anonymous, AnonHugePages, ...). Expensive: see module doc."""
        text = self._read(pid, "smaps_rollup")
        out: dict[str, int] = {}
        for line in text.splitlines()[1:]:  # the first line is the address range header
            key, sep, value = line.partition(":")
            if sep and value.strip():
                out[key.strip()] = int(value.split()[0])
        if not out:
            # A zombie has no address space left: the file reads empty.
            raise ProcessGone(pid, "smaps_rollup (no address space)")
        return out

    def smaps(self, pid: int) -> list[Vma]:
        """Every mapping of the process, in address order (see Vma). Expensive: it walks the page
        tables of every mapping under the target's mmap lock (module doc)."""
        text = self._read(pid, "smaps")
        out: list[Vma] = []
        head: list[str] | None = None
        kb: dict[str, int] = {}
        flags: frozenset[str] = frozenset()

        def close() -> None:
            lo, _, hi = head[0].partition("-")
            path = head[5] if len(head) > 5 else ""
            out.append(Vma(int(lo, 16), int(hi, 16), head[1], path, kb, flags))

        for line in text.splitlines():
            key, sep, value = line.partition(":")
            if sep and " " not in key:  # "Rss:    12 kB" or "VmFlags: rd wr mr"
                if key == "VmFlags":
                    flags = frozenset(value.split())
                else:
                    f = value.split()
                    if f and f[-1] == "kB":
                        kb[key] = int(f[0])
                continue
            # A mapping's first line: "lo-hi perms offset dev inode [path]" (the path may hold
            # spaces, e.g. "/anon_hugepage (deleted)"); a file name may hold ':' too.
            if head is not None:
                close()
            head = line.split(None, 5)
            if len(head) < 5 or "-" not in head[0]:
                raise CollectorError(f"{self.root}/{pid}/smaps: unexpected line {line[:80]!r}")
            kb, flags = {}, frozenset()
        if head is not None:
            close()
        if not out:
            raise ProcessGone(pid, "smaps (no address space)")
        return out

    def stack_pointers(self, pid: int) -> dict[int, int]:
        """thread id -> its user stack pointer, for every thread blocked in the kernel now
        (/proc/PID/task/TID/syscall: "nr args... sp pc", or "-1 sp pc" outside a system call);
        a running thread says "running" and is left out, as is a thread that exited meanwhile.
        Needs ptrace access to the process (root, or the same user)."""
        out: dict[int, int] = {}
        for tid in self.task_ids(pid):
            try:
                f = self._read(None, f"{pid}/task/{tid}/syscall").split()
            except CollectorError:  # exited meanwhile, or no access
                continue
            if len(f) >= 3 and f[-2].startswith("0x"):
                out[tid] = int(f[-2], 16)
        return out

    def exe(self, pid: int) -> str | None:
        """The executable /proc/PID/exe points at; None when it cannot be read (kernel threads,
        another user's process, a fixture without the link). It changes at execve, which is how
        the collectors tell the launch gate (/bin/sh) from the server it becomes."""
        try:
            return os.readlink(self.root / str(pid) / "exe")
        except FileNotFoundError:
            if not (self.root / str(pid)).exists():
                raise ProcessGone(pid, "exe") from None
            return None
        except OSError:
            return None

    def task_ids(self, pid: int) -> list[int]:
        """Live thread ids (exited threads are not listed)."""
        try:
            return [int(t) for t in os.listdir(self.root / str(pid) / "task")]
        except FileNotFoundError:
            raise ProcessGone(pid, "task/") from None

    def task_status_ctxsw(self, pid: int, tid: int) -> tuple[int, int] | None:
        """(voluntary, nonvoluntary) of one thread; None if the thread exited meanwhile."""
        try:
            text = self._read(None, f"{pid}/task/{tid}/status")
        except CollectorError:
            return None
        vol = invol = 0
        for line in text.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                vol = int(line.split(":", 1)[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                invol = int(line.split(":", 1)[1])
        return vol, invol

    def cmdline(self, pid: int) -> list[str]:
        """The process's arguments ([] for a kernel thread or a zombie)."""
        return [a for a in self._read(pid, "cmdline").split("\0") if a]

    def alive(
        self, pid: int, start_ticks: int | None = None, running_at: float | None = None
    ) -> bool:
        """True while the process `pid` named exists and is not a zombie (gone or unreadable:
        False), and is the same process: pids are reused (docs/facts.md, "Processes": they wrap
        within minutes here), so a pid alone may name someone else's process by now.

        `start_ticks`: its start time as recorded with the pid (Stat.starttime_ticks): the
        process must have exactly that one. `running_at`: a wall-clock time at which the process
        was certainly running (the mtime of a directory it created and wrote): a process that
        started after it is a later one that was given the same pid."""
        try:
            stat = self.stat(pid)
        except CollectorError:  # ProcessGone included
            return False
        if stat.state == "Z":
            return False
        if start_ticks is not None and stat.starttime_ticks != start_ticks:
            return False
        if running_at is not None:
            started = self.boot_time() + stat.starttime_ticks / CLK_TCK
            return started <= running_at + 1  # btime is whole seconds
        return True

    def group_members(self, pgid: int) -> list[int]:
        """The live (not zombie) processes of process group `pgid`. A group outlives its leader:
        mariadb-install-db's script dies at once on SIGTERM while the bootstrap server it started
        goes on writing its datadir for most of a second (measured: 0.68 s)."""
        return [st.pid for st in self.every_stat() if st.pgrp == pgid and st.state != "Z"]

    def every_stat(self):
        """Stat of every process readable now (one walk of the procfs root; the gone skipped)."""
        for entry in os.scandir(self.root) if self.root.is_dir() else []:
            if not entry.name.isdigit():
                continue
            try:
                yield self.stat(int(entry.name))
            except CollectorError:
                continue

    def boot_time(self) -> float:
        """When the system booted (seconds since the epoch: /proc/stat btime)."""
        for line in self._read(None, "stat").splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
        raise CollectorError(f"{self.root}/stat: no btime line")

    # -- system-wide ----------------------------------------------------------------------------
    def meminfo(self) -> dict[str, int]:
        """/proc/meminfo in kB (HugePages_* are counts, as the kernel gives them)."""
        out: dict[str, int] = {}
        for line in self._read(None, "meminfo").splitlines():
            key, sep, value = line.partition(":")
            fields = value.split()
            if sep and fields and fields[0].isdigit():
                out[key] = int(fields[0])
        return out

    def vmstat(self, prefix: str | tuple[str, ...] = "thp_") -> dict[str, int]:
        """/proc/vmstat counters whose names start with `prefix` (or one of several; "" for
        all). System-wide."""
        out: dict[str, int] = {}
        for line in self._read(None, "vmstat").splitlines():
            key, _, value = line.partition(" ")
            if key.startswith(prefix) and value:
                out[key] = int(value)
        return out

    def sys_vm(self, name: str) -> int | None:
        """/proc/sys/vm/NAME as an integer (nr_hugepages); None when it cannot be read."""
        try:
            return int(self._read(None, f"sys/vm/{name}").strip())
        except (CollectorError, ValueError):
            return None

    def write_sys_vm(self, name: str, value: int) -> None:
        """Write /proc/sys/vm/NAME (root). OSError as the kernel gives it: the caller decides."""
        (self.root / "sys" / "vm" / name).write_text(f"{int(value)}\n")

    def sys_vm_writable(self, name: str) -> bool:
        return os.access(self.root / "sys" / "vm" / name, os.W_OK)

    def mounts(self) -> dict[str, str]:
        """Mount point -> filesystem type, as this process sees them (/proc/self/mounts)."""
        out: dict[str, str] = {}
        for line in self._read(None, "self/mounts").splitlines():
            f = line.split()
            if len(f) >= 3:
                out[f[1].replace("\\040", " ")] = f[2]
        return out

    def kernel_thread(self, comm: str) -> int | None:
        """The pid of the kernel thread named `comm` (a child of kthreadd, pid 2), e.g.
        khugepaged; None when there is none. Walks /proc once: call it once, keep the pid."""
        return next((st.pid for st in self.every_stat() if st.comm == comm and st.ppid == 2), None)

    def loadavg(self) -> tuple[float, float, float]:
        f = self._read(None, "loadavg").split()
        return float(f[0]), float(f[1]), float(f[2])
