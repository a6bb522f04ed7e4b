"""Who holds the server's resident memory: RSS taken apart by mapping, from /proc/PID/smaps.

The kernel's RSS is one number; a DBA who sees it grow needs to know which part grew. Every
mapping of the process goes into exactly one part, so the parts add up to RSS (the sum of the
mappings' Rss is the kernel's RSS, up to what changed while the file was read):

- bufpool: the buffer pool's mapping(s). Found by VmFlags "dd": the server excludes them from core
  dumps (MADV_DONTDUMP). MariaDB 10.11 does so by default for its buffer pool (and its redo log
  buffer, 2 x innodb_log_buffer_size: measured 128 MiB pool + 32 MiB log buffer here); MySQL and
  Percona only with `core-file` and innodb_buffer_pool_in_core_file=OFF, which mallocsweep's
  my.cnf sets for them when the decomposition is on. Where the server did not mark it (MySQL's
  chunks without that setting), the pool is found by its size instead (pool_mappings below, given
  the pool's size: the one identification the hugepage reading uses too), so bufpool is every
  don't-dump mapping plus the pool's mappings. Wrong where a server marks other memory
  don't-dump, or where it allocates its pool through malloc with neither the mark nor a mapping
  of its own (then the pool is in `heap`): a server where neither finds anything has bufpool 0
  and says so (`marked` False).
- stacks: thread stacks. A mapping holding the stack pointer of a thread blocked in the kernel
  (/proc/PID/task/TID/syscall), the main thread's [stack], and mappings shaped like glibc's
  pthread stacks: a small PROT_NONE guard mapping right below, or a guard region installed in it
  (VmFlags "gu", glibc >= 2.42). Where the kernel marks MAP_STACK mappings "nh" (6.7 and later),
  a shaped mapping must carry "nh" too. Adjacent stacks merge into one mapping (glibc 2.43 puts
  its guards inside), which is then one stack mapping holding several threads. Wrong for a
  running thread's stack with nothing of the shape (missed: counted as heap), for glibc's cache
  of exited threads' stacks (counted as stacks: they are), and for a glibc arena whose unused
  tail below it is under 1 MiB (taken for a guard: the arena's first heap counted as a stack).
- file: mappings of files (the binary, libraries, their static data right after them: .bss is
  the anonymous mapping that starts where an object's last file mapping ends: 8.5 MiB resident
  for mariadbd), and the kernel's own mappings
  ([vdso], [vvar], io_uring rings, shared memory). Wrong where an allocator's mapping happens to
  start exactly where a library's data ends (then counted as the library's .bss).
- heap: every other anonymous mapping: the allocator's arenas, extents, spans and segments,
  [heap] (brk), and large blocks mmap'ed by malloc.

Besides Rss, each part has its AnonHugePages (transparent huge pages), Swap (not resident: not
in Rss), hugetlb pages (Private_Hugetlb + Shared_Hugetlb: explicit huge pages are never counted
in Rss) and address space. `heap_huge_kb` is what the hugepage study wants: anonymous huge pages
outside the buffer pool.

The parts add up to the RSS the mappings had while they were read; the kernel's VmRSS is read
before (the boundary's figure) and right after (`rss_after_kb`): a process that changed meanwhile
(jemalloc's background thread purging, a load still ending) shows it as a difference between the
two, and its parts then lie between them, not within 1% of either (seen once in 881 readings
here: a spike's idle time ending while jemalloc's background thread purged, 3.7%).

Which mapping is the buffer pool (pool_mappings), given its size. Measured here on the servers we
run:
- MariaDB 10.11.19 maps its pool as one mapping advised MADV_DONTDUMP (VmFlags `dd`): 272 MB for
  a 256 MB pool on 4 kB pages; with large_pages=1 a 256 MB hugetlb mapping (`ht dd`), beside two
  16 MB log buffers (`ht dd`) and its key cache and Aria page cache (hugetlb, no `dd`).
- MySQL 9.7 maps it in chunks (innodb_buffer_pool_chunk_size, 128 MB): two 130 MB anonymous
  mappings for 256 MB, no `dd` (each chunk `dd` with innodb_buffer_pool_in_core_file=OFF); with
  --large-pages two 132 MB hugetlb mappings (`ht`).
So the pool is: the largest `dd` mapping when its size is near the pool's; else the group of
equally sized mappings (`dd` ones, then hugetlb, then anonymous without a path) whose sizes add up
to the pool's (between 1x and 1.15x of it, chunks and their block descriptors). A reading that
finds none says so (pool_mappings 0 in the hugepage reading).

Reading smaps walks every mapping's page tables under the server's mmap lock (docs/facts.md, "Reading smaps"): the
collectors read it once per phase (cycle) boundary (read_smaps; the boundary's AnonHugePages, its
parts and its hugepage reading all come from that one read), never in the 1 Hz loop; `make bench`
measures what one read costs.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import asdict, dataclass, fields

from collectors.procfs import ProcFS, Vma

PARTS = ("bufpool", "stacks", "file", "heap")
# The pool's mappings add up to at least its size and at most this much more (chunk rounding and
# InnoDB's block descriptors: 272 MB for 256 MB on MariaDB, 2 x 130 MB on MySQL).
POOL_SLACK = 1.15
# A PROT_NONE mapping this small right below an anonymous one is a thread stack's guard (glibc
# uses one page by default; MySQL asks for none beyond it). A glibc arena's unused tail is
# usually tens of MiB.
GUARD_MAX_KB = 1024
# The kernel's special mappings (no file, not the process's memory in any allocator's sense).
_SPECIAL = ("[vdso]", "[vvar]", "[vvar_vclock]", "[vsyscall]", "[uprobes]")


@dataclass(frozen=True)
class Part:
    """One part of the process's memory, kB (mappings: how many mappings it has)."""

    rss_kb: int = 0
    anon_huge_kb: int = 0  # of rss_kb, backed by transparent huge pages
    swap_kb: int = 0  # swapped out (not in rss_kb)
    hugetlb_kb: int = 0  # explicit huge pages (not in rss_kb)
    size_kb: int = 0  # address space
    mappings: int = 0

    def add(self, v: Vma) -> Part:
        k = v.kb
        return Part(
            self.rss_kb + k.get("Rss", 0),
            self.anon_huge_kb + k.get("AnonHugePages", 0),
            self.swap_kb + k.get("Swap", 0),
            self.hugetlb_kb + k.get("Private_Hugetlb", 0) + k.get("Shared_Hugetlb", 0),
            self.size_kb + v.size_kb,
            self.mappings + 1,
        )


@dataclass(frozen=True)
class Decomposition:
    """The process's memory in parts (see the module doc) at one moment."""

    bufpool: Part
    stacks: Part
    file: Part
    heap: Part
    # the buffer pool was found (marked don't-dump, or by its size): bufpool is not merely empty
    marked: bool
    threads: int  # threads whose stack pointer was read (blocked in the kernel)
    read_ms: float  # wall time of the smaps read (and the stack pointers')
    # The kernel's VmRSS right after the read: against the VmRSS read before it, how much the
    # process changed while its mappings were walked (a purging thread, a load still ending)
    rss_after_kb: int | None = None

    @property
    def parts(self) -> dict[str, Part]:
        return {p: getattr(self, p) for p in PARTS}

    @property
    def rss_kb(self) -> int:
        """What the parts add up to: the process's RSS as the mappings say it."""
        return sum(p.rss_kb for p in self.parts.values())

    @property
    def swap_kb(self) -> int:
        return sum(p.swap_kb for p in self.parts.values())

    @property
    def hugetlb_kb(self) -> int:
        return sum(p.hugetlb_kb for p in self.parts.values())

    @property
    def anon_huge_kb(self) -> int:
        return sum(p.anon_huge_kb for p in self.parts.values())

    @property
    def heap_huge_kb(self) -> int:
        """Anonymous huge pages outside the buffer pool's mapping (the heap's and stacks')."""
        return self.anon_huge_kb - self.bufpool.anon_huge_kb

    def to_raw(self) -> dict:
        """As a raw record keeps it (rundir.records.RawParts)."""
        return {p: asdict(getattr(self, p)) for p in PARTS} | {
            "marked": self.marked,
            "threads": self.threads,
            "read_ms": round(self.read_ms, 3),
            "rss_after_kb": self.rss_after_kb,
        }

    @classmethod
    def from_raw(cls, raw: dict) -> Decomposition:
        names = {f.name for f in fields(Part)}
        return cls(
            *(Part(**{k: v for k, v in raw[p].items() if k in names}) for p in PARTS),
            bool(raw.get("marked")),
            int(raw.get("threads") or 0),
            float(raw.get("read_ms") or 0.0),
            raw.get("rss_after_kb"),
        )


def _anonymous(v: Vma) -> bool:
    """Anonymous private memory: no file behind it ("" or [heap]; an anonymous hugetlb mapping
    is named after the hidden hugetlbfs file "/anon_hugepage (deleted)")."""
    if v.perms.endswith("s"):
        return False
    return v.anonymous or v.path == "[heap]"


def _file(v: Vma) -> bool:
    return v.path.startswith("/") and not v.anonymous


def _is_guard(v: Vma | None, nxt: Vma) -> bool:
    return (
        v is not None
        and v.end == nxt.start
        and v.perms.startswith("---")
        and _anonymous(v)
        and v.size_kb <= GUARD_MAX_KB
    )


def pool_mappings(vmas: list[Vma], pool_kb: int | None) -> list[Vma]:
    """The mappings that hold the buffer pool of `pool_kb` (see the module doc), or []."""
    if not pool_kb:
        return []
    hi = pool_kb * POOL_SLACK
    dd = [v for v in vmas if "dd" in v.flags and v.anonymous]
    if dd:
        best = max(dd, key=lambda v: v.size_kb)
        if pool_kb <= best.size_kb <= hi:
            return [best]
    # Equally sized anonymous mappings (chunks) adding up to the pool: don't-dump ones first (the
    # server's own mark), then hugetlb ones (with large pages the pool is the only large hugetlb
    # user on MySQL), then any without a path.
    picks = (
        lambda v: "dd" in v.flags and v.anonymous,
        lambda v: v.hugetlb,
        lambda v: v.anonymous and not v.hugetlb,
    )
    for pick in picks:
        sizes: dict[int, list[Vma]] = {}
        for v in vmas:
            # not a thread stack (gu: guard gap) nor an address-space reservation (nr)
            if pick(v) and v.size_kb >= 1024 and not v.flags & {"nr", "gu"}:
                sizes.setdefault(v.size_kb, []).append(v)
        for size in sorted(sizes, reverse=True):
            group = sizes[size]
            if pool_kb <= size * len(group) <= hi:
                return group
    # The kernel merges adjacent mappings of the same flags: MariaDB 10.11's pool and its redo log
    # buffer (both don't-dump) came as one 98304 kB mapping for a 64 MB pool and a 32 MB buffer.
    # smaps cannot split it: the pool's figures then include that buffer, and the heap's share
    # stays the heap's (before, no pool was found and every huge page was counted as the heap's).
    if dd and best.size_kb > hi:
        return [best]
    return []


def classify(
    vmas: list[Vma], stack_pointers: list[int], pool_kb: int | None = None
) -> dict[str, list[Vma]]:
    """Each mapping into its part (module doc); `vmas` in address order as smaps lists them.
    `pool_kb`: the buffer pool's size, to find it where the server did not mark it don't-dump."""
    # The pool by its size (pool_mappings: what the hugepage reading calls the pool), beside the
    # don't-dump mark: the mark alone misses MySQL's chunks when the server was not asked to
    # leave its pool out of core dumps; the size alone misses MariaDB's redo log buffer (marked).
    pool = {id(v) for v in pool_mappings(vmas, pool_kb)}
    starts = [v.start for v in vmas]
    holding: set[int] = set()  # indices of mappings holding a blocked thread's stack pointer
    for sp in stack_pointers:
        i = bisect.bisect_right(starts, sp) - 1
        if i >= 0 and vmas[i].start <= sp < vmas[i].end:
            holding.add(i)
    # Does this kernel mark MAP_STACK mappings "nh" (Linux >= 6.7)? Learnt from the stacks the
    # stack pointers found: then a mapping merely shaped like a stack must be marked too (an
    # allocator's MADV_NOHUGEPAGE region is not a stack without a guard below it either).
    found = [vmas[i] for i in holding if vmas[i].path == ""]
    marks_nh = bool(found) and all("nh" in v.flags for v in found)
    out: dict[str, list[Vma]] = {p: [] for p in PARTS}
    prev: Vma | None = None
    for i, v in enumerate(vmas):
        if v.path in _SPECIAL or v.path.startswith("anon_inode:") or v.perms.endswith("s"):
            part = "file"  # the kernel's mappings, shared memory
        elif _file(v):
            part = "file"
        elif v.path == "[stack]" or i in holding:
            part = "stacks"
        elif "dd" in v.flags or id(v) in pool:
            part = "bufpool"
        elif prev is not None and prev.end == v.start and _file(prev) and v.path == "":
            part = "file"  # an object's .bss, right after its last file mapping
        elif (
            v.path == ""
            and v.perms.startswith("rw")
            and ("gu" in v.flags or _is_guard(prev, v))
            and (not marks_nh or "nh" in v.flags)
        ):
            part = "stacks"
        else:
            part = "heap"
        out[part].append(v)
        prev = v
    return out


def decompose_vmas(
    vmas: list[Vma],
    stack_pointers: list[int],
    read_ms: float = 0.0,
    rss_after_kb: int | None = None,
    pool_kb: int | None = None,
) -> Decomposition:
    parts = classify(vmas, stack_pointers, pool_kb)
    summed = {}
    for name, vs in parts.items():
        p = Part()
        for v in vs:
            p = p.add(v)
        summed[name] = p
    return Decomposition(
        **summed,
        marked=bool(parts["bufpool"]),
        threads=len(stack_pointers),
        read_ms=read_ms,
        rss_after_kb=rss_after_kb,
    )


@dataclass(frozen=True)
class SmapsRead:
    """One read of the process's smaps at a boundary: every mapping (ProcFS.smaps), and what the
    parts need read around it. The boundary's AnonHugePages, parts and hugepage reading
    (collectors.hugepages) all come from it: smaps is read once per boundary (module doc)."""

    vmas: list[Vma]
    smaps_ms: float  # wall time of reading smaps alone
    read_ms: float  # with the stack pointers read just before it, when they were
    stack_pointers: list[int] | None = None  # None: not read (no parts wanted)
    rss_after_kb: int | None = None  # the kernel's VmRSS right after (with the stack pointers)

    @property
    def anon_huge_kb(self) -> int:
        """AnonHugePages of every mapping: what smaps_rollup says, from the same walk."""
        return sum(v.kb.get("AnonHugePages", 0) for v in self.vmas)

    def decompose(self, pool_kb: int | None = None) -> Decomposition:
        return decompose_vmas(
            self.vmas, self.stack_pointers or [], self.read_ms, self.rss_after_kb, pool_kb
        )


def read_smaps(procfs: ProcFS, pid: int, parts: bool = False) -> SmapsRead:
    """Read the process's smaps; with `parts`, also its blocked threads' stack pointers (just
    before) and its VmRSS (right after), for decompose(). ProcessGone when it has exited."""
    t0 = time.perf_counter()
    sps = list(procfs.stack_pointers(pid).values()) if parts else None
    t1 = time.perf_counter()
    vmas = procfs.smaps(pid)
    t2 = time.perf_counter()
    after = procfs.status(pid).vm_rss_kb if parts else None
    return SmapsRead(vmas, (t2 - t1) * 1000, (t2 - t0) * 1000, sps, after)


def decompose(procfs: ProcFS, pid: int, pool_kb: int | None = None) -> Decomposition:
    """Read the process's smaps (and its blocked threads' stack pointers) and take it apart.
    ProcessGone when it has exited."""
    return read_smaps(procfs, pid, parts=True).decompose(pool_kb)
