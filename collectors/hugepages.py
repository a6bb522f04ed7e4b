"""Huge pages of one server process at a phase boundary: where they are, and what the kernel has.

One reading (HugepageReading) per boundary, from /proc/PID/smaps (per mapping), /proc/meminfo
(HugePages_*), and khugepaged's /proc/PID/stat (its CPU time: what collapsing small pages into
huge ones costs). smaps walks the server's page tables under its mmap lock, so it is read at
phase boundaries only, never in the sampler's loop (docs/facts.md, "Reading smaps"), and once there: the reading's
process part comes from the boundary's one read (collectors.smaps.read_smaps), which gives the
parts and the snapshot's AnonHugePages too.

Which mappings are the buffer pool: collectors.smaps.pool_mappings (its module doc has the
layouts measured on MariaDB 10.11.19 and MySQL 9.7.4), the same identification the parts use. A
reading that finds none says so (pool_mappings 0): the heap's share is then every anonymous huge
page.

Hugetlb pages are not in RSS: /proc/PID/status VmRSS leaves them out (they show as
HugetlbPages), so a buffer pool on explicit huge pages leaves RSS smaller by its size. The
reading keeps the process's hugetlb kB beside it, for the report to add back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from collectors.errors import CollectorError
from collectors.procfs import ProcFS, Vma
from collectors.smaps import SmapsRead, pool_mappings


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


def _sum(vmas: list[Vma], *names: str) -> int:
    return sum(v.kb.get(n, 0) for v in vmas for n in names)


def of_mappings(vmas: list[Vma], pool_kb: int | None) -> dict:
    """The process part of a reading (module doc), from the mappings of one smaps read."""
    pool = pool_mappings(vmas, pool_kb)
    in_pool = {id(v) for v in pool}
    return {
        "anon_huge_kb": _sum(vmas, "AnonHugePages"),
        "shmem_pmd_kb": _sum(vmas, "ShmemPmdMapped"),
        "hugetlb_kb": _sum(vmas, "Private_Hugetlb", "Shared_Hugetlb"),
        "pool_mappings": len(pool),
        "pool_kb": sum(v.size_kb for v in pool) if pool else None,
        "pool_page_kb": max((v.kb.get("KernelPageSize", 0) for v in pool), default=None),
        "pool_hugetlb_kb": _sum(pool, "Private_Hugetlb", "Shared_Hugetlb") if pool else None,
        "pool_anon_huge_kb": _sum(pool, "AnonHugePages") if pool else None,
        "heap_anon_huge_kb": _sum([v for v in vmas if id(v) not in in_pool], "AnonHugePages"),
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

    def reading(self, smaps: SmapsRead) -> HugepageReading:
        """Everything, the process's part from the boundary's read of its smaps."""
        return HugepageReading(
            **of_mappings(smaps.vmas, self.pool_kb),
            **system_hugepages(self.procfs),
            khugepaged_cpu_s=self.khugepaged_cpu_s(),
            read_ms=round(smaps.smaps_ms, 3),
        )
