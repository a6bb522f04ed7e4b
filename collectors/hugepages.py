"""Huge pages of one server process at a phase boundary: where they are, and what the kernel has.

One reading (HugepageReading) per boundary, from /proc/PID/smaps (per mapping), /proc/meminfo
(HugePages_*), and khugepaged's /proc/PID/stat (its CPU time: what collapsing small pages into
huge ones costs). smaps walks the server's page tables under its mmap lock, so this is read at
phase boundaries only, never in the sampler's loop (DESIGN.md).

Which mapping is the buffer pool. Measured here on the servers we run:
- MariaDB 10.11.19 maps its pool as one mapping advised MADV_DONTDUMP (VmFlags `dd`): 272 MB for
  a 256 MB pool on 4 kB pages; with large_pages=1 a 256 MB hugetlb mapping (`ht dd`), beside two
  16 MB log buffers (`ht dd`) and its key cache and Aria page cache (hugetlb, no `dd`).
- MySQL 9.7 maps it in chunks (innodb_buffer_pool_chunk_size, 128 MB): two 130 MB anonymous
  mappings for 256 MB, no `dd`; with --large-pages two 132 MB hugetlb mappings (`ht`).
So the pool is: the largest `dd` mapping when its size is near the pool's; else the group of
equally sized mappings (hugetlb, or anonymous without a path) whose sizes add up to the pool's
(between 1x and 1.15x of it, chunks and their block descriptors). A reading that finds none says
so (pool_mappings 0): the heap's share is then every anonymous huge page.

Hugetlb pages are not in RSS: /proc/PID/status VmRSS leaves them out (they show as
HugetlbPages), so a buffer pool on explicit huge pages leaves RSS smaller by its size. The
reading keeps the process's hugetlb kB beside it, for the report to add back.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field

from collectors.errors import CollectorError
from collectors.procfs import ProcFS

_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$")
# The pool's mappings add up to at least its size and at most this much more (chunk rounding and
# InnoDB's block descriptors: 272 MB for 256 MB on MariaDB, 2 x 130 MB on MySQL).
POOL_SLACK = 1.15


@dataclass
class Mapping:
    """One block of /proc/PID/smaps: its address range, path, kB fields and VmFlags."""

    start: int
    end: int
    path: str
    fields: dict[str, int] = field(default_factory=dict)
    flags: frozenset[str] = frozenset()

    @property
    def size_kb(self) -> int:
        return (self.end - self.start) // 1024

    @property
    def hugetlb(self) -> bool:
        return "ht" in self.flags

    @property
    def anonymous(self) -> bool:
        """No file behind it (hugetlb pages show a path, '/anon_hugepage (deleted)')."""
        return not self.path or self.path.startswith("/anon_hugepage")

    def kb(self, name: str) -> int:
        return self.fields.get(name, 0)


def parse_smaps(text: str) -> list[Mapping]:
    """The mappings of an smaps text, in address order."""
    out: list[Mapping] = []
    cur: Mapping | None = None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            cur = Mapping(int(m.group(1), 16), int(m.group(2), 16), m.group(4).strip())
            out.append(cur)
            continue
        if cur is None:
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        if key == "VmFlags":
            cur.flags = frozenset(value.split())
            continue
        parts = value.split()
        if parts and parts[0].isdigit():
            cur.fields[key] = int(parts[0])
    return out


def pool_mappings(maps: list[Mapping], pool_kb: int | None) -> list[Mapping]:
    """The mappings that hold the buffer pool of `pool_kb` (see the module doc), or []."""
    if not pool_kb:
        return []
    hi = pool_kb * POOL_SLACK
    dd = [m for m in maps if "dd" in m.flags and m.anonymous]
    if dd:
        best = max(dd, key=lambda m: m.size_kb)
        if pool_kb <= best.size_kb <= hi:
            return [best]
    # Equally sized anonymous mappings (chunks) adding up to the pool: hugetlb ones first (with
    # large pages the pool is the only large hugetlb user on MySQL), then any without a path.
    for pick in (lambda m: m.hugetlb, lambda m: m.anonymous and not m.hugetlb):
        sizes: dict[int, list[Mapping]] = {}
        for m in maps:
            # not a thread stack (gu: guard gap) nor an address-space reservation (nr)
            if pick(m) and m.size_kb >= 1024 and not m.flags & {"nr", "gu"}:
                sizes.setdefault(m.size_kb, []).append(m)
        for size in sorted(sizes, reverse=True):
            group = sizes[size]
            if pool_kb <= size * len(group) <= hi:
                return group
    return []


@dataclass(frozen=True)
class HugepageReading:
    """Huge pages at one moment (kB unless said; counts of huge pages for hugepages_*)."""

    anon_huge_kb: int | None = None  # AnonHugePages of every mapping (THP)
    shmem_pmd_kb: int | None = None  # ShmemPmdMapped: shared memory mapped with huge pages
    hugetlb_kb: int | None = None  # the process's hugetlb pages (Private_ + Shared_Hugetlb)
    pool_mappings: int = 0  # mappings identified as the buffer pool (0: none found)
    pool_kb: int | None = None  # their size
    pool_page_kb: int | None = None  # their KernelPageSize (2048: hugetlb; 4: small pages)
    pool_hugetlb_kb: int | None = None  # hugetlb pages in them (touched ones)
    pool_anon_huge_kb: int | None = None  # THP huge pages in them
    heap_anon_huge_kb: int | None = None  # THP huge pages outside them: the heap's share
    hugepages_total: int | None = None  # /proc/meminfo HugePages_Total (system-wide)
    hugepages_free: int | None = None
    hugepages_rsvd: int | None = None
    hugepages_surp: int | None = None
    hugepage_size_kb: int | None = None  # Hugepagesize
    khugepaged_cpu_s: float | None = None  # khugepaged's user + system CPU since boot
    read_ms: float | None = None  # what reading smaps cost us (wall)

    def to_dict(self) -> dict:
        return asdict(self)


def of_mappings(maps: list[Mapping], pool_kb: int | None) -> dict:
    """The process part of a reading (module doc), from parsed smaps."""
    pool = pool_mappings(maps, pool_kb)
    in_pool = {id(m) for m in pool}
    ahp = sum(m.kb("AnonHugePages") for m in maps)
    pool_ahp = sum(m.kb("AnonHugePages") for m in pool)
    return {
        "anon_huge_kb": ahp,
        "shmem_pmd_kb": sum(m.kb("ShmemPmdMapped") for m in maps),
        "hugetlb_kb": sum(m.kb("Private_Hugetlb") + m.kb("Shared_Hugetlb") for m in maps),
        "pool_mappings": len(pool),
        "pool_kb": sum(m.size_kb for m in pool) if pool else None,
        "pool_page_kb": max((m.kb("KernelPageSize") for m in pool), default=None),
        "pool_hugetlb_kb": (
            sum(m.kb("Private_Hugetlb") + m.kb("Shared_Hugetlb") for m in pool) if pool else None
        ),
        "pool_anon_huge_kb": pool_ahp if pool else None,
        "heap_anon_huge_kb": sum(m.kb("AnonHugePages") for m in maps if id(m) not in in_pool),
    }


def system_hugepages(procfs: ProcFS) -> dict:
    """HugePages_Total/Free/Rsvd/Surp and Hugepagesize now (None where unreadable)."""
    try:
        mi = procfs.meminfo()
    except CollectorError:
        mi = {}
    return {
        "hugepages_total": mi.get("HugePages_Total"),
        "hugepages_free": mi.get("HugePages_Free"),
        "hugepages_rsvd": mi.get("HugePages_Rsvd"),
        "hugepages_surp": mi.get("HugePages_Surp"),
        "hugepage_size_kb": mi.get("Hugepagesize"),
    }


class HugepageReader:
    """Readings of one server process; finds khugepaged once."""

    def __init__(self, procfs: ProcFS, pool_kb: int | None = None):
        self.procfs = procfs
        self.pool_kb = pool_kb
        try:
            self.khugepaged = procfs.kernel_thread("khugepaged")
        except OSError:
            self.khugepaged = None

    def khugepaged_cpu_s(self) -> float | None:
        """khugepaged's CPU seconds since it started; 0.0 while there is no khugepaged (the
        kernel stops it under THP `never` and starts a new one, from zero, when THP is switched
        on: a cell's setting is made before its collectors start, so a cell sees one of them)."""
        for attempt in (0, 1):
            if self.khugepaged is not None:
                try:
                    st = self.procfs.stat(self.khugepaged)
                except CollectorError:
                    st = None
                if st is not None and st.comm == "khugepaged":
                    return round(st.utime_s + st.stime_s, 3)
            if attempt == 0:
                try:
                    self.khugepaged = self.procfs.kernel_thread("khugepaged")
                except OSError:
                    return None
        return 0.0

    def system(self) -> HugepageReading:
        """The system part alone (the server is gone, or not ours to read)."""
        return HugepageReading(
            **system_hugepages(self.procfs), khugepaged_cpu_s=self.khugepaged_cpu_s()
        )

    def read(self, pid: int) -> HugepageReading:
        """Everything; ProcessGone when the server has exited."""
        t0 = time.monotonic()
        maps = parse_smaps(self.procfs.smaps_text(pid))
        ms = round((time.monotonic() - t0) * 1000, 3)
        return HugepageReading(
            **of_mappings(maps, self.pool_kb),
            **system_hugepages(self.procfs),
            khugepaged_cpu_s=self.khugepaged_cpu_s(),
            read_ms=ms,
        )
