"""Who holds the server's resident memory: RSS taken apart by mapping, from /proc/PID/smaps.

The kernel's RSS is one number; a DBA who sees it grow needs to know which part grew. Every
mapping of the process goes into exactly one part, so the parts add up to RSS (the sum of the
mappings' Rss is the kernel's RSS, up to what changed while the file was read):

- bufpool: the buffer pool's mapping(s). Found by VmFlags "dd": the server excludes them from core
  dumps (MADV_DONTDUMP). MariaDB 10.11 does so by default for its buffer pool (and its redo log
  buffer, 2 x innodb_log_buffer_size: measured 128 MiB pool + 32 MiB log buffer here); MySQL and
  Percona only with `core-file` and innodb_buffer_pool_in_core_file=OFF, which mallocsweep's
  my.cnf sets for them when the decomposition is on. Wrong where a server marks other memory
  don't-dump, or where it allocates its pool through malloc without the mark (then the pool is in
  `heap`): a server without any "dd" mapping has bufpool 0 and says so (`marked` False).
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

Reading smaps walks every mapping's page tables under the server's mmap lock (DESIGN.md): the
collectors read it at phase (cycle) boundaries only, never in the 1 Hz loop; `make bench`
measures what one read costs.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import asdict, dataclass, fields

from collectors.procfs import ProcFS, Vma

PARTS = ("bufpool", "stacks", "file", "heap")
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
    marked: bool  # some mapping was marked don't-dump: bufpool found, not merely empty
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
    return v.path in ("", "[heap]") or v.path.startswith("/anon_hugepage")


def _file(v: Vma) -> bool:
    return v.path.startswith("/") and not v.path.startswith("/anon_hugepage")


def _is_guard(v: Vma | None, nxt: Vma) -> bool:
    return (
        v is not None
        and v.end == nxt.start
        and v.perms.startswith("---")
        and _anonymous(v)
        and v.size_kb <= GUARD_MAX_KB
    )


def classify(vmas: list[Vma], stack_pointers: list[int]) -> dict[str, list[Vma]]:
    """Each mapping into its part (module doc); `vmas` in address order as smaps lists them."""
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
        elif "dd" in v.flags:
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
) -> Decomposition:
    parts = classify(vmas, stack_pointers)
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


def decompose(procfs: ProcFS, pid: int) -> Decomposition:
    """Read the process's smaps (and its blocked threads' stack pointers) and take it apart.
    ProcessGone when it has exited."""
    t0 = time.perf_counter()
    sps = procfs.stack_pointers(pid)
    vmas = procfs.smaps(pid)
    took = (time.perf_counter() - t0) * 1000
    after = procfs.status(pid).vm_rss_kb
    return decompose_vmas(vmas, list(sps.values()), took, after)
