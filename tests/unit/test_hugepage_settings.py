"""Hugepage settings, their system changes and their readings, without a server: the settings a
[thp] section makes, the controller on a fake sysfs and /proc (what it refuses, writes, reads back
and gives back, also after a killed runner), the reading of the mappings (ProcFS.smaps, the one
smaps parser) on the layouts measured on MariaDB 10.11.19 and MySQL 9.7.4, and the per-level
figures derived from boundary readings."""

from __future__ import annotations

import json

import pytest

from collectors.hugepages import of_mappings
from collectors.procfs import ProcFS, Vma
from collectors.smaps import classify, pool_mappings
from rundir.derive.phases import hugepage_figures
from rundir.format import FORMAT5_ADDED_COLUMNS, HUGEPAGE_COLUMNS
from rundir.migrations import RawRun, update_to_5
from suites.config.hugepage_settings import settings_of
from suites.config.sections import ThpSection
from suites.errors import SuiteError
from suites.runner import thp as thpmod

MB = 1024  # kB


# -- smaps layouts -------------------------------------------------------------------------------
def mapping(start_mb: int, size_mb: int, flags: str, path: str = "", ahp_mb: int = 0,
            hugetlb_mb: int = 0, page_kb: int = 4) -> str:  # fmt: skip
    """One /proc/PID/smaps block (the fields collectors.hugepages reads, and a few others)."""
    a, b = start_mb << 20, (start_mb + size_mb) << 20
    dev = "00:11 4242" if "ht" in flags.split() else "00:00 0"
    return (
        f"{a:012x}-{b:012x} rw-p 00000000 {dev}    {path}\n"
        f"Size:           {size_mb * MB} kB\n"
        f"KernelPageSize:     {page_kb} kB\n"
        f"Rss:            {0 if hugetlb_mb else size_mb * MB // 2} kB\n"
        f"AnonHugePages:  {ahp_mb * MB} kB\n"
        f"ShmemPmdMapped:        0 kB\n"
        f"Private_Hugetlb: {hugetlb_mb * MB} kB\n"
        f"Shared_Hugetlb:        0 kB\n"
        f"VmFlags: {flags}\n"
    )


def parse(tmp_path, text: str) -> list[Vma]:
    """The mappings of an smaps text, as the collectors read them (ProcFS.smaps of a fixture)."""
    (tmp_path / "1").mkdir(exist_ok=True)
    (tmp_path / "1" / "smaps").write_text(text)
    return ProcFS(tmp_path).smaps(1)


HUGE = "/anon_hugepage (deleted)"
# MariaDB 10.11.19, 256 MB pool on small pages: one 272 MB mapping advised MADV_DONTDUMP (dd),
# a 16 MB log buffer (dd), glibc arena heaps (64 MB, the rest reserved: nr) and a heap mapping.
MARIADB_SMALL = "".join([
    mapping(100, 272, "rd wr mr mw me ac dd", ahp_mb=40),
    mapping(400, 16, "rd wr mr mw me ac dd"),
    mapping(500, 63, "mr mw me nr"),
    mapping(600, 137, "rd wr mr mw me ac", ahp_mb=30),
    mapping(800, 8, "rd wr mr mw me ac", "[stack]"),
])  # fmt: skip
# The same with large_pages=1: the pool (256 MB) and two 16 MB log buffers on hugetlb pages (ht dd),
# the key cache and Aria page cache too (ht, 124 and 106 MB).
MARIADB_LARGE = "".join([
    mapping(100, 16, "rd wr mr mw me de ht dd", HUGE, page_kb=2048),
    mapping(200, 16, "rd wr mr mw me de ht dd", HUGE, hugetlb_mb=16, page_kb=2048),
    mapping(300, 256, "rd wr mr mw me de ht dd", HUGE, hugetlb_mb=256, page_kb=2048),
    mapping(600, 124, "rd wr mr mw me de ht", HUGE, hugetlb_mb=2, page_kb=2048),
    mapping(800, 31, "rd wr mr mw me ac", ahp_mb=10),
    mapping(900, 106, "rd wr mr mw me de ht", HUGE, page_kb=2048),
])  # fmt: skip
# MySQL 9.7.4, 256 MB pool: two 130 MB chunks (no dd), tcmalloc's [heap], thread stacks (gu nh),
# and four glibc-like 64 MB arenas that must not pass for the pool.
MYSQL_SMALL = "".join([
    mapping(100, 237, "rd wr mr mw me ac", "[heap]", ahp_mb=100),
    mapping(400, 211, "rd wr mr mw me gu ac nh"),
    mapping(700, 130, "rd wr mr mw me ac", ahp_mb=64),
    mapping(900, 130, "rd wr mr mw me ac", ahp_mb=2),
    *(mapping(1100 + 70 * i, 64, "rd wr mr mw me ac", ahp_mb=8) for i in range(4)),
])  # fmt: skip
# The same with innodb_buffer_pool_in_core_file=OFF ([memory] parts): each chunk marked don't-dump,
# beside an allocator's 270 MB anonymous mapping that is near the pool's size on its own.
MYSQL_SMALL_MARKED = "".join([
    mapping(100, 237, "rd wr mr mw me ac", "[heap]", ahp_mb=100),
    mapping(400, 270, "rd wr mr mw me ac", ahp_mb=20),
    mapping(700, 130, "rd wr mr mw me ac dd", ahp_mb=64),
    mapping(900, 130, "rd wr mr mw me ac dd", ahp_mb=2),
])  # fmt: skip
MYSQL_LARGE = "".join([
    mapping(100, 237, "rd wr mr mw me ac", "[heap]", ahp_mb=50),
    mapping(700, 132, "rd wr mr mw me de ht", HUGE, hugetlb_mb=4, page_kb=2048),
    mapping(900, 132, "rd wr mr mw me de ht", HUGE, hugetlb_mb=20, page_kb=2048),
])  # fmt: skip


@pytest.mark.parametrize(
    "text, count, size_mb, page_kb",
    [
        (MARIADB_SMALL, 1, 272, 4),
        (MARIADB_LARGE, 1, 256, 2048),
        (MYSQL_SMALL, 2, 260, 4),
        (MYSQL_SMALL_MARKED, 2, 260, 4),
        (MYSQL_LARGE, 2, 264, 2048),
    ],
    ids=[
        "mariadb-small-pages",
        "mariadb-large-pages",
        "mysql-small-pages",
        "mysql-marked-chunks",
        "mysql-large-pages",
    ],
)
def test_the_buffer_pool_is_found_in_each_measured_layout(tmp_path, text, count, size_mb, page_kb):
    vmas = parse(tmp_path, text)
    pool = pool_mappings(vmas, 256 * MB)
    assert len(pool) == count
    assert sum(m.size_kb for m in pool) == size_mb * MB
    assert {m.kb["KernelPageSize"] for m in pool} == {page_kb}
    # The parts' bufpool is the same pool, with every other don't-dump mapping (MariaDB's log
    # buffers)
    bufpool = classify(vmas, [], 256 * MB)["bufpool"]
    assert all(m in bufpool for m in pool)
    assert all(m in pool or "dd" in m.flags for m in bufpool)


def test_the_heaps_share_is_every_huge_page_outside_the_pool(tmp_path):
    fig = of_mappings(parse(tmp_path, MYSQL_SMALL), 256 * MB)
    assert fig["pool_anon_huge_kb"] == 66 * MB
    assert fig["anon_huge_kb"] == (100 + 66 + 32) * MB
    assert fig["heap_anon_huge_kb"] == (100 + 32) * MB  # [heap] and the arenas
    assert fig["hugetlb_kb"] == 0 and fig["pool_hugetlb_kb"] == 0
    large = of_mappings(parse(tmp_path, MARIADB_LARGE), 256 * MB)
    assert large["pool_page_kb"] == 2048 and large["pool_hugetlb_kb"] == 256 * MB
    # every hugetlb mapping counts for the process: the log buffers and key cache too
    assert large["hugetlb_kb"] == (16 + 256 + 2) * MB
    assert large["heap_anon_huge_kb"] == 10 * MB


def test_without_a_pool_size_or_a_match_the_heap_holds_every_huge_page(tmp_path):
    for pool_kb in (None, 4096 * MB):  # unknown; or no mapping near 4 GB
        fig = of_mappings(parse(tmp_path, MARIADB_SMALL), pool_kb)
        assert fig["pool_mappings"] == 0 and fig["pool_kb"] is None
        assert fig["heap_anon_huge_kb"] == fig["anon_huge_kb"] == 70 * MB


# -- settings ------------------------------------------------------------------------------------
def test_settings_cross_the_dimensions_and_label_what_varies():
    labels = [s.label for s in settings_of(["always", "never"], ["defer", "madvise"], [0, 511],
                                            [False, True])]  # fmt: skip
    assert labels[:5] == [
        "always+defrag=defer+max_ptes_none=0",
        "always+defrag=defer+max_ptes_none=511",
        "always+defrag=madvise+max_ptes_none=0",
        "always+defrag=madvise+max_ptes_none=511",
        "never",  # defrag and khugepaged change nothing under never: one cell, not four
    ]
    assert labels[5:] == [x + "+large-pages" for x in labels[:5]]
    # one value of a dimension is applied, not named
    (s,) = settings_of(["always"], "defer+madvise", [0])
    assert (s.label, s.defrag, s.max_ptes_none) == ("always", "defer+madvise", 0)


def test_the_mongodb_8_profile_is_what_mongodb_documents():
    (s,) = ThpSection(modes=["mongodb-8"]).settings()
    assert (s.enabled, s.defrag, s.max_ptes_none, s.profile) == (
        "always", "defer+madvise", 0, "mongodb-8"
    )  # fmt: skip
    assert ThpSection().labels() == ["system"]  # a suite without [thp] is as it was


# -- the controller on a fake sysfs and /proc ----------------------------------------------------
class FakeSystem:
    """A sysfs THP directory and a /proc with meminfo and sys/vm/nr_hugepages whose writes take:
    nr_hugepages makes that many pages (all free), up to `can_make`."""

    def __init__(self, tmp_path, enabled="always [madvise] never",
                 defrag="always defer defer+madvise [madvise] never", khugepaged=True):  # fmt: skip
        self.sysfs = tmp_path / "thp"
        self.proc = tmp_path / "proc"
        (self.sysfs / "khugepaged").mkdir(parents=True)
        (self.proc / "sys" / "vm").mkdir(parents=True)
        (self.sysfs / "enabled").write_text(enabled + "\n")
        (self.sysfs / "defrag").write_text(defrag + "\n")
        (self.sysfs / "hpage_pmd_size").write_text("2097152\n")
        if khugepaged:
            (self.sysfs / "khugepaged" / "max_ptes_none").write_text("511\n")
        self.can_make = 10_000
        self.avail_kb = 8 << 20
        self.set_pages(0)

    def set_pages(self, n: int) -> None:
        n = min(n, self.can_make)
        (self.proc / "sys" / "vm" / "nr_hugepages").write_text(f"{n}\n")
        (self.proc / "meminfo").write_text(
            f"MemAvailable: {self.avail_kb} kB\nHugePages_Total: {n}\nHugePages_Free: {n}\n"
            "HugePages_Rsvd: 0\nHugePages_Surp: 0\nHugepagesize: 2048 kB\n"
        )

    @property
    def pages(self) -> int:
        return int((self.proc / "sys" / "vm" / "nr_hugepages").read_text())


@pytest.fixture
def system(tmp_path, monkeypatch):
    monkeypatch.setenv("MALLOCSWEEP_STATE", str(tmp_path / "state"))
    fake = FakeSystem(tmp_path)

    def write(self, name, value):
        path = self.sysfs / name
        words = path.read_text().replace("[", "").replace("]", "").split()
        if name == thpmod.MAX_PTES_NONE:
            path.write_text(f"{value}\n")
            return
        if value not in words:
            raise OSError(22, "Invalid argument")
        path.write_text(" ".join(f"[{w}]" if w == value else w for w in words) + "\n")

    monkeypatch.setattr(thpmod.ThpController, "_write", write)
    monkeypatch.setattr(thpmod.ThpController, "_write_vm", lambda self, n: fake.set_pages(n))
    monkeypatch.setattr(thpmod, "write_knob", _fake_knob(fake))
    return fake


def _fake_knob(fake):
    def write_knob(name, value, sysfs, procfs):
        if name == thpmod.NR_HUGEPAGES:
            fake.set_pages(int(value))
        elif name == thpmod.MAX_PTES_NONE:
            (sysfs / name).write_text(f"{value}\n")
        else:
            path = sysfs / name
            words = path.read_text().replace("[", "").replace("]", "").split()
            path.write_text(" ".join(f"[{w}]" if w == value else w for w in words) + "\n")

    return write_knob


def controller(tmp_path, fake, settings, pages=None, reserve=True):
    need = thpmod.LargePagesNeed(pages, 2048, reserve) if pages else None
    return thpmod.ThpController(
        tmp_path, sysfs=fake.sysfs, settings=settings, procfs=ProcFS(fake.proc), large_pages=need
    )


def test_a_large_pages_cell_reserves_its_pages_and_gives_them_back(tmp_path, system):
    settings = ThpSection(modes=["never"], max_ptes_none=[0], large_pages=[True]).settings()
    ctl = controller(tmp_path, system, settings, pages=70)
    ctl.check([s.label for s in settings])
    applied = ctl.apply("never+large-pages")
    assert system.pages == 70 and applied.large_pages["reserved"] == 70
    assert applied.large_pages["after"]["hugepages_free"] == 70
    assert applied.to_manifest()["setting"]["large_pages"] is True
    rec = thpmod.leftover()  # recorded before the first write, for a killed runner's successor
    assert rec["original"]["nr_hugepages"] == 0
    assert ctl.restore()["nr_hugepages"] == 0
    assert system.pages == 0 and thpmod.leftover() is None


def test_max_ptes_none_is_set_for_the_cell_and_restored_even_to_zero(tmp_path, system):
    ctl = controller(tmp_path, system, ThpSection(modes=["mongodb-8"]).settings())
    (system.sysfs / thpmod.MAX_PTES_NONE).write_text("0\n")  # an admin's 0 must come back as 0
    ctl.apply("mongodb-8")  # sets 0: nothing to change there; enabled and defrag change
    assert thpmod.state(system.sysfs, ProcFS(system.proc))["defrag"] == "defer+madvise"
    ctl.restore()
    (system.sysfs / thpmod.MAX_PTES_NONE).write_text("511\n")
    settings = ThpSection(modes=["always"], max_ptes_none=[7]).settings()
    ctl = controller(tmp_path, system, settings)
    applied = ctl.apply("always")
    assert applied.in_force["max_ptes_none"] == 7
    rec = json.loads(thpmod.pending_file().read_text())
    rec["pid"] = 999_999_999  # the runner was killed
    thpmod.pending_file().write_text(json.dumps(rec))
    ctl.original = None
    restored = thpmod.restore_leftover()
    assert restored["original"][thpmod.MAX_PTES_NONE] == 511
    assert (system.sysfs / thpmod.MAX_PTES_NONE).read_text().strip() == "511"
    assert thpmod.current(system.sysfs)["enabled"] == "madvise"
    assert "max_ptes_none=511" in thpmod.restored_text(restored)


def test_a_killed_large_pages_cell_is_given_back_by_its_successor(tmp_path, system):
    ctl = controller(tmp_path, system, ThpSection(modes=["always"], large_pages=[True]).settings(),
                     pages=40)  # fmt: skip
    ctl.apply("always+large-pages")
    assert system.pages == 40
    for f in (thpmod.pending_file(), tmp_path / thpmod.PENDING_NAME):
        f.write_text(json.dumps(json.loads(f.read_text()) | {"pid": 999_999_999}))
    ctl.original = None  # the dead runner restores nothing
    assert thpmod.restore_leftover()["original"]["nr_hugepages"] == 0
    assert system.pages == 0 and thpmod.current(system.sysfs)["enabled"] == "madvise"
    assert not (tmp_path / thpmod.PENDING_NAME).exists()


def test_a_reservation_the_kernel_cannot_make_fails_the_cell_and_puts_everything_back(
    tmp_path, system
):
    system.can_make = 25  # fragmented memory: the kernel makes fewer than asked
    ctl = controller(tmp_path, system, ThpSection(modes=["always"], large_pages=[True]).settings(),
                     pages=40)  # fmt: skip
    with pytest.raises(SuiteError, match="the kernel made only 25 of the 40 asked for"):
        ctl.apply("always+large-pages")
    assert system.pages == 0 and thpmod.current(system.sysfs)["enabled"] == "madvise"
    assert ctl.original is None and thpmod.leftover() is None


@pytest.mark.parametrize(
    "section, pages, reserve, setup, message",
    [
        ({"modes": ["always"], "defrag": "defer+madvise"}, None, True,
         lambda f: (f.sysfs / "defrag").write_text("always defer [madvise] never\n"),
         r"thp\.defrag: 'defer\+madvise', which this kernel does not offer \(.*/defrag offers: "
         r"always, defer, madvise, never\)"),
        ({"modes": ["mongodb-8"]}, None, True,
         lambda f: (f.sysfs / "defrag").write_text("always defer [madvise] never\n"),
         r"thp\.defrag: 'mongodb-8' sets defrag=defer\+madvise, which this kernel does not offer"),
        ({"modes": ["always"], "max_ptes_none": [600]}, None, True, None,
         r"thp\.max_ptes_none 600: this kernel takes 0\.\.511"),
        ({"modes": ["always"], "max_ptes_none": [0]}, None, True,
         lambda f: (f.sysfs / "khugepaged" / "max_ptes_none").unlink(),
         r"thp\.max_ptes_none 0: this kernel has no .*max_ptes_none \(no khugepaged\)"),
        ({"modes": ["never"], "large_pages": [True]}, 300, False, None,
         r"thp\.large_pages: the buffer pool needs 300 huge pages of 2048 kB \(600 MB\) free; "
         r"HugePages_Free is 0: reserve them \(echo 300 > "),
        ({"modes": ["never"], "large_pages": [True]}, 5000, True, None,
         r"thp\.large_pages: the buffer pool needs 5000 huge pages of 2048 kB \(10,000 MB\); "
         r"MemAvailable is only 8,192 MB"),
    ],
    ids=["defrag-not-offered", "profile-not-offered", "ptes-above-limit", "no-khugepaged",
         "too-few-free", "too-little-memory"],
)  # fmt: skip
def test_what_this_machine_cannot_do_is_refused_before_anything_changes(
    tmp_path, system, section, pages, reserve, setup, message
):
    if setup:
        setup(system)
    settings = ThpSection(**section).settings()
    ctl = controller(tmp_path, system, settings, pages=pages, reserve=reserve)
    before = (thpmod.current(system.sysfs), system.pages)
    with pytest.raises(SuiteError, match=message) as e:
        ctl.check([s.label for s in settings])
    assert "\n" not in str(e.value)
    assert (thpmod.current(system.sysfs), system.pages) == before
    assert thpmod.leftover() is None


def test_reserving_needs_write_access_to_nr_hugepages(tmp_path, system, monkeypatch):
    monkeypatch.setattr(ProcFS, "sys_vm_writable", lambda self, name: False)
    settings = ThpSection(modes=["never"], large_pages=[True]).settings()
    ctl = controller(tmp_path, system, settings, pages=10)
    with pytest.raises(SuiteError, match=r"reserving 10 huge pages .* needs write access to "
                       r".*nr_hugepages \(run as root\)"):  # fmt: skip
        ctl.check(["never+large-pages"])


# -- per-level figures -----------------------------------------------------------------------------
def test_a_levels_hugepage_figures_are_its_end_reading_and_its_deltas():
    start = {"khugepaged_cpu_s": 1.5, "hugetlb_kb": 0}
    end = {"khugepaged_cpu_s": 1.75, "hugetlb_kb": 2048, "heap_anon_huge_kb": 4096,
           "pool_page_kb": 2048, "hugepages_free": 7}  # fmt: skip
    fig = hugepage_figures(start, end, {"compact_stall": 3, "compact_fail": 1},
                           {"compact_stall": 5, "compact_fail": 1})  # fmt: skip
    assert set(fig) == set(HUGEPAGE_COLUMNS)
    assert (fig["compact_stall"], fig["compact_fail"], fig["khugepaged_cpu_s"]) == (2, 0, 0.25)
    assert (fig["hugetlb_kb"], fig["heap_anon_huge_kb"], fig["hugepages_free"]) == (2048, 4096, 7)
    assert all(v is None for v in hugepage_figures(None, None, {}, {}).values())
    # khugepaged restarted in the phase (a THP mode written): its CPU count began again
    restarted = hugepage_figures({"khugepaged_cpu_s": 9.5}, {"khugepaged_cpu_s": 0.25}, {}, {})
    assert restarted["khugepaged_cpu_s"] is None


def test_update_to_5_gives_older_rows_the_hugepage_columns_empty():
    up = update_to_5(RawRun(manifest={"format_version": 4}, columns=["cell", "qps"],
                            rows=[{"cell": "c", "qps": 1.0}]))  # fmt: skip
    # the hugepage columns among everything format 5 added (the memory parts too), all empty
    assert set(HUGEPAGE_COLUMNS) <= set(FORMAT5_ADDED_COLUMNS)
    assert up.columns == ["cell", "qps", *FORMAT5_ADDED_COLUMNS]
    assert up.rows == [{"cell": "c", "qps": 1.0} | dict.fromkeys(FORMAT5_ADDED_COLUMNS)]
