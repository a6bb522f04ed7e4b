"""RSS taken apart by mapping (collectors/smaps.py) on recorded /proc/PID/smaps of real servers,
the figures derived from a boundary's parts (rundir/derive), and a burst's release
(rundir/derive/scenario.py).

The two smaps were read from servers started here: MariaDB 10.11.19 under glibc (128 MiB buffer
pool, idle, VmRSS 100740 kB) and MySQL 9.7.4 in its root under its linked tcmalloc with core-file
and innodb_buffer_pool_in_core_file=OFF (VmRSS 543068 kB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.errors import ProcessGone
from collectors.procfs import ProcFS, Vma
from collectors.smaps import Decomposition, classify, decompose, decompose_vmas
from rundir.derive.levels import held_resident, in_use_split
from rundir.derive.phases import part_figures
from rundir.derive.scenario import MIN_BURST_KB, release, scenario_columns

SMAPS = Path(__file__).parent.parent / "fixtures" / "smaps"
VMRSS = {"mariadb-10.11-glibc": 100740, "mysql-9.7-tcmalloc": 543068}


def proc_tree(
    tmp_path: Path, smaps: str, syscalls: dict[int, str] | None = None, rss_kb: int = 0
) -> ProcFS:
    """A procfs root holding pid 1 with this smaps, these threads' syscall files, and a status
    saying VmRSS `rss_kb`."""
    p = tmp_path / "1"
    (p / "task").mkdir(parents=True)
    (p / "smaps").write_text(smaps)
    (p / "status").write_text(f"Name:\tmariadbd\nState:\tS\nVmRSS:\t{rss_kb} kB\nThreads:\t1\n")
    for tid, line in (syscalls or {}).items():
        (p / "task" / str(tid)).mkdir()
        (p / "task" / str(tid) / "syscall").write_text(line + "\n")
    return ProcFS(tmp_path)


@pytest.mark.parametrize("name", sorted(VMRSS))
def test_parts_add_up_to_the_kernels_rss(name, tmp_path):
    fs = proc_tree(tmp_path, (SMAPS / f"{name}.smaps").read_text(), rss_kb=VMRSS[name])
    vmas = fs.smaps(1)
    assert vmas == sorted(vmas, key=lambda v: v.start)
    dec = decompose(fs, 1)
    assert dec.rss_kb == VMRSS[name] == sum(v.kb["Rss"] for v in vmas) == dec.rss_after_kb
    assert sum(p.mappings for p in dec.parts.values()) == len(vmas)
    assert dec.marked and dec.bufpool.rss_kb > 0 and dec.heap.rss_kb > 0


def test_mariadb_buffer_pool_stacks_and_static_data(tmp_path):
    vmas = proc_tree(tmp_path, (SMAPS / "mariadb-10.11-glibc.smaps").read_text()).smaps(1)
    parts = classify(vmas, [])
    # The don't-dump mappings: the 128 MiB pool (reserved up to its maximum) and the log buffer.
    assert sorted(v.size_kb for v in parts["bufpool"]) == [32768, 131072]
    assert all("dd" in v.flags for v in parts["bufpool"])
    # Thread stacks by their shape (a 4 kB guard right below; "nh": this kernel marks MAP_STACK):
    # the 8 MiB default stacks of InnoDB's threads and the 292 kB ones of thread_stack.
    sizes = sorted(v.size_kb for v in parts["stacks"])
    assert (
        sizes.count(8192) == 4
        and sizes.count(296) == 4
        and "[stack]" in {v.path for v in parts["stacks"]}
    )
    # mariadbd's .bss (anonymous, right where the binary's last mapping ends) is the binary's.
    bss = next(v for v in vmas if v.start == 0x55E6DD3C9000)
    assert bss in parts["file"] and bss.kb["Rss"] == 8696
    # glibc's arenas (MAP_NORESERVE heaps) and [heap] are the heap; their PROT_NONE tails too.
    assert any(v.path == "[heap]" for v in parts["heap"])
    assert all("dd" not in v.flags for v in parts["heap"])


def test_mysql_merged_stacks_and_pool_in_the_brk_heap(tmp_path):
    vmas = proc_tree(tmp_path, (SMAPS / "mysql-9.7-tcmalloc.smaps").read_text()).smaps(1)
    parts = classify(vmas, [])
    # glibc 2.43 installs its guards inside the stack mapping (VmFlags "gu"): one mapping of 210
    # MiB holds many stacks, with no separate guard mapping below.
    assert max(v.size_kb for v in parts["stacks"]) == 215160
    assert all("gu" in v.flags for v in parts["stacks"] if v.path == "")
    # The pool, marked don't-dump by core-file + innodb_buffer_pool_in_core_file=OFF
    (pool,) = parts["bufpool"]
    assert pool.size_kb == 134020
    # tcmalloc's heap grows by sbrk: [heap] is nearly all of it
    assert [v.path for v in parts["heap"]] == ["[heap]"]


def test_an_unmarked_pool_is_found_by_its_size(tmp_path):
    """MySQL without innodb_buffer_pool_in_core_file=OFF: no don't-dump mark. Given the pool's
    size (128 MiB here), the parts find it as the hugepage reading does (pool_mappings)."""
    text = (SMAPS / "mysql-9.7-tcmalloc.smaps").read_text()
    unmarked = "\n".join(
        ln.replace(" dd", "") if ln.startswith("VmFlags:") else ln for ln in text.splitlines()
    )
    vmas = proc_tree(tmp_path, unmarked + "\n").smaps(1)
    assert not any("dd" in v.flags for v in vmas)
    assert not classify(vmas, [])["bufpool"]  # the size unknown: bufpool 0, said so
    dec = decompose_vmas(vmas, [], pool_kb=128 * 1024)
    assert dec.marked and dec.bufpool.mappings == 1 and dec.bufpool.size_kb == 134020
    assert dec.bufpool == decompose(proc_tree(tmp_path / "marked", text), 1).bufpool


def test_stack_pointers_find_a_stack_without_its_shape(tmp_path):
    base = 0x7F0000000000
    smaps = "".join(
        f"{lo:x}-{hi:x} {perms} 00000000 00:00 0 {path}\n"
        f"Size: {(hi - lo) // 1024} kB\nRss: {rss} kB\nAnonHugePages: {huge} kB\n"
        f"Swap: {swap} kB\nVmFlags: {flags}\n"
        for lo, hi, perms, path, rss, huge, swap, flags in (
            (base, base + 0x200000, "rw-p", "", 1024, 0, 0, "rd wr mr mw me ac nh"),
            (base + 0x200000, base + 0x201000, "---p", "", 0, 0, 0, "mr mw me nh"),
            (base + 0x201000, base + 0x301000, "rw-p", "", 16, 0, 4, "rd wr mr mw me ac nh"),
            (base + 0x400000, base + 0x800000, "rw-p", "", 2048, 2048, 0, "rd wr mr mw me ac"),
        )
    )
    fs = proc_tree(
        tmp_path,
        smaps,
        {
            11: f"202 0x1 0x2 0x3 0x4 0x5 0x6 {base + 0x300F00:#x} 0x7f00dead",  # blocked
            12: "running",  # no stack pointer
            13: f"-1 {base + 0x8000:#x} 0x1",  # blocked outside a system call
        },
    )
    assert fs.stack_pointers(1) == {11: base + 0x300F00, 13: base + 0x8000}
    dec = decompose(fs, 1)
    # mapping 0 holds thread 13's stack pointer (no guard below it); mapping 2 thread 11's (and
    # it has the shape); the "nh" region without a guard and without a pointer would be heap.
    assert dec.stacks.mappings == 2 and dec.stacks.rss_kb == 1040 and dec.stacks.swap_kb == 4
    assert dec.heap.rss_kb == 2048 and dec.heap_huge_kb == 2048 and dec.threads == 2
    assert dec.rss_kb == 1024 + 16 + 2048


def test_an_allocators_nohugepage_region_is_not_a_stack_where_the_kernel_marks_stacks():
    def vma(lo, hi, perms, flags, path=""):
        return Vma(lo, hi, perms, path, {"Rss": (hi - lo) // 1024}, frozenset(flags.split()))

    guard = vma(0x1000, 0x2000, "---p", "mr nh")
    stack = vma(0x2000, 0x10000, "rw-p", "rd wr nh")
    # an allocator's MADV_NOHUGEPAGE region right after a small PROT_NONE one, without "nh"
    # itself on a kernel that marks stacks: not a stack
    lone = vma(0x20000, 0x21000, "---p", "mr")
    region = vma(0x21000, 0x40000, "rw-p", "rd wr")
    parts = classify([guard, stack, lone, region], [0x3000])
    assert parts["stacks"] == [stack] and region in parts["heap"]


def test_a_process_without_address_space_is_gone(tmp_path):
    fs = proc_tree(tmp_path, "")
    with pytest.raises(ProcessGone):
        fs.smaps(1)


def test_raw_round_trip_and_derived_columns(tmp_path):
    fs = proc_tree(tmp_path, (SMAPS / "mariadb-10.11-glibc.smaps").read_text())
    dec = decompose(fs, 1)
    raw = dec.to_raw()
    assert Decomposition.from_raw(raw).parts == dec.parts
    cols = part_figures(raw)
    assert (
        cols["heap_resident_kb"] + cols["bufpool_resident_kb"] + cols["stacks_kb"] + cols["file_kb"]
        == VMRSS["mariadb-10.11-glibc"]
    )
    assert cols["heap_anon_huge_kb"] == dec.heap_huge_kb and cols["swap_kb"] == 0
    assert part_figures(None) == dict.fromkeys(cols)
    assert held_resident(50_000, 42_000) == 8000 and held_resident(None, 1) is None
    # malloc'ed, never touched (jemalloc on MySQL 9.7): not resident, its own part, none negative
    assert held_resident(10_000, 12_000) == 0
    assert in_use_split(10_000, 12_000) == (10_000, 2000)
    assert in_use_split(50_000, 42_000) == (42_000, 0) and in_use_split(None, 5) == (None, None)


@pytest.mark.parametrize(
    ("pre", "end", "idle", "want"),
    [
        # everything back within the first second
        (100_000, 200_000, [(1.0, 105_000), (2.0, 100_000)], (1.0, 1.0)),
        # nothing back (an allocator that keeps what it freed while idle)
        (100_000, 200_000, [(1.0, 200_000), (2.0, 200_000)], (0.0, None)),
        # half back, within 10% after 3 s
        (100_000, 140_000, [(1.0, 139_000), (3.0, 109_000), (4.0, 120_000)], (0.5, 3.0)),
        # the burst's end is already within 10% of the level before it
        (100_000, 105_000, [(1.0, 104_000)], (0.2, 0.0)),
        # a burst under MIN_BURST_KB: no share to speak of
        (100_000, 100_000 + MIN_BURST_KB - 1, [(1.0, 100_000)], (None, 0.0)),
        (None, 200_000, [(1.0, 100_000)], (None, None)),
    ],
)
def test_release(pre, end, idle, want):
    assert release(pre, end, idle) == want


def test_scenario_columns():
    level = {"scenario": {"scenario": "spike", "cycle": 2, "pre_burst_kb": 100_000,
             "burst_end_kb": 200_000, "idle": [[1.0, 150_000]]}}  # fmt: skip
    assert scenario_columns(level) == {
        "scenario_cycle": 2,
        "burst_returned": 0.5,
        "burst_return_s": None,
    }
    assert scenario_columns({"scenario": {"scenario": "dump", "cycle": 3}})["scenario_cycle"] == 3
    assert set(scenario_columns({}).values()) == {None}


def test_decompose_vmas_is_what_decompose_reads(tmp_path):
    fs = proc_tree(tmp_path, (SMAPS / "mysql-9.7-tcmalloc.smaps").read_text())
    assert decompose_vmas(fs.smaps(1), []).parts == decompose(fs, 1).parts


def test_a_pool_merged_with_its_log_buffer_is_still_the_pool():
    """MariaDB 10.11 with a 64 MB pool: the kernel merged the pool and the 32 MB redo log buffer
    (both don't-dump, adjacent) into one 98304 kB mapping, beyond POOL_SLACK. It is the pool (with
    the buffer inside), so its huge pages are not counted as the heap's."""
    from collectors.smaps import pool_mappings

    def vma(lo_mb, size_mb, flags, path=""):
        lo, hi = lo_mb << 20, (lo_mb + size_mb) << 20
        return Vma(lo, hi, "rw-p", path, {"Rss": size_mb << 10}, frozenset(flags.split()))

    merged = vma(1024, 96, "rd wr mr mw me ac dd")
    heap = vma(4096, 300, "rd wr mr mw me ac")  # larger, not marked: never the pool
    assert pool_mappings([merged, heap], 64 * 1024) == [merged]
    exact = vma(2048, 68, "rd wr mr mw me ac dd")  # a pool mapping within the slack wins
    assert pool_mappings([merged, exact, heap], 64 * 1024) == [exact]
    assert pool_mappings([heap], 64 * 1024) == []  # nothing marked, no chunks: none found


def test_a_recorded_runs_parts_rederived_are_never_negative_and_add_up():
    """The recorded fragmentation run's raw records, derived again: in use splits into resident
    and never touched, the heap into resident in use and held, and no part is negative."""
    import json

    from rundir.derive.levels import derive_cell
    from rundir.records import check_raw

    raws = sorted(
        (Path(__file__).parent.parent / "fixtures/runs/real-fragmentation-format5/raw").glob(
            "*.json"
        )
    )
    seen = 0
    for path in raws:
        for row in derive_cell(check_raw(json.loads(path.read_text()), str(path))).rows:
            if row["alloc_in_use_kb"] is None or row["heap_resident_kb"] is None:
                continue
            seen += 1
            resident, untouched = row["alloc_in_use_resident_kb"], row["alloc_untouched_kb"]
            held = row["alloc_held_resident_kb"]
            assert min(resident, untouched, held) >= 0, row["cell"]
            assert resident + held == row["heap_resident_kb"]
            assert resident + untouched == row["alloc_in_use_kb"]
    assert seen >= 10
