"""DatasetCache on a fake datadir: keys, atomic store, restore methods, and what it refuses."""

import hashlib
import json
import os
from pathlib import Path

import pytest

from rundir.format import OWNER_MARKER
from suites.datasets.cache import (
    DatasetCache,
    fingerprint,
    restore_vs_prepare,
)
from suites.errors import SuiteError
from suites.families.mysql.plugin import MYSQL

SPEC = {"kind": "sysbench", "tables": 2, "table_size": 100}


def fake_datadir(root: Path) -> Path:
    d = root / "prep" / "datadir"
    for sub in ("mysql", "sbtest"):
        (d / sub).mkdir(parents=True)
    (d / "mysql" / "user.frm").write_bytes(b"frm" * 100)
    (d / "mysql" / "user.MAI").write_bytes(b"aria header")
    (d / "sbtest" / "db.opt").write_text("default-character-set=latin1\n")
    (d / "sbtest" / "sbtest1.frm").write_bytes(b"F" * 1658)
    (d / "sbtest" / "sbtest1.ibd").write_bytes(os.urandom(64 * 1024))
    (d / "ibdata1").write_bytes(os.urandom(16 * 1024))
    # a preallocated redo log: 8 MB with data only in its first 4 KB
    with open(d / "ib_logfile0", "wb") as f:
        f.write(b"L" * 4096)
        f.truncate(8 << 20)
    (d / OWNER_MARKER).write_text("x\n")
    return d


def digest(root: Path) -> dict:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def cached(tmp_path):
    cache = DatasetCache(tmp_path / "cache", linkable=MYSQL.linkable)
    key = cache.key("10.11.19-MariaDB", SPEC)
    src = fake_datadir(tmp_path)
    meta = {"server_version": "10.11.19-MariaDB", "spec": SPEC, "prepare_s": 12.5}
    cache.store(key, src, meta, check=MYSQL.datadir_problem)
    return cache, key, src


def test_key_is_stable_readable_and_specific():
    c = DatasetCache(Path("/nonexistent"))
    k = c.key("10.11.19-MariaDB-0+deb12u1", {"a": 1, "b": 2})
    assert k == c.key("10.11.19-MariaDB-0+deb12u1", {"b": 2, "a": 1})
    assert k.startswith("10.11.19-MariaDB-0-deb12u1-")
    assert k != c.key("10.11.20-MariaDB-0+deb12u1", {"a": 1, "b": 2})
    assert k != c.key("10.11.19-MariaDB-0+deb12u1", {"a": 1, "b": 3})


def test_only_frm_may_be_hard_linked():
    # the MySQL family's rule; a cache of no family's links nothing
    assert MYSQL.linkable(Path("sbtest/sbtest1.frm"))
    assert not DatasetCache(Path("/nonexistent")).linkable(Path("sbtest/sbtest1.frm"))
    for name in (
        "sbtest/sbtest1.ibd",
        "ibdata1",
        "ib_logfile0",
        "undo001",
        "ib_buffer_pool",
        "mysql/user.MAI",
        "mysql/user.MAD",
        "aria_log_control",
        "sbtest/db.opt",
        "mysql/general_log.CSV",
    ):
        assert not MYSQL.linkable(Path(name)), name


def test_store_is_owned_complete_and_read_only(cached):
    cache, key, src = cached
    assert cache.has(key)
    assert (cache.root / OWNER_MARKER).is_file() and (cache.path(key) / OWNER_MARKER).is_file()
    meta = cache.meta(key)
    assert meta["server_version"] == "10.11.19-MariaDB" and meta["spec"] == SPEC
    assert meta["prepare_s"] == 12.5 and meta["key"] == key and meta["fingerprint"]
    pristine = cache.path(key) / "datadir"
    assert digest(pristine) == digest(src)
    assert all(not (p.stat().st_mode & 0o222) for p in pristine.rglob("*") if p.is_file())
    assert not list(cache.root.glob(".store-*"))


def test_restore_links_only_frm_and_keeps_holes(cached, tmp_path):
    cache, key, _ = cached
    pristine = cache.path(key) / "datadir"
    dest = tmp_path / "cell1" / "datadir"
    got = cache.restore(key, dest)
    assert got["method"] in ("copy", "reflink") and got["seconds"] >= 0
    assert got["files"]["hardlink"] == 2  # mysql/user.frm, sbtest/sbtest1.frm
    assert digest(dest) == digest(pristine) | {OWNER_MARKER: digest(dest)[OWNER_MARKER]}
    for p in pristine.rglob("*"):
        if p.is_file():
            same = os.path.samestat(p.stat(), (dest / p.relative_to(pristine)).stat())
            assert same == (p.suffix == ".frm"), p
    log = dest / "ib_logfile0"
    assert log.stat().st_size == 8 << 20 and log.stat().st_blocks * 512 < 1 << 20
    assert os.access(dest / "sbtest" / "sbtest1.ibd", os.W_OK)


def test_writes_to_a_restored_copy_never_reach_pristine(cached, tmp_path):
    cache, key, _ = cached
    pristine = cache.path(key) / "datadir"
    before = digest(pristine)
    dest = tmp_path / "cell" / "datadir"
    cache.restore(key, dest)
    for p in dest.rglob("*"):
        if p.is_file() and p.suffix != ".frm":
            with open(p, "r+b") as f:  # in place, as InnoDB writes
                f.write(b"\0CELL WROTE HERE\0")
    assert digest(pristine) == before
    cache.restore(key, tmp_path / "cell2" / "datadir")  # fingerprint still matches


def test_restore_refuses_a_used_datadir(cached, tmp_path):
    cache, key, _ = cached
    dest = tmp_path / "cell" / "datadir"
    cache.restore(key, dest)
    with pytest.raises(SuiteError, match="already holds files"):
        cache.restore(key, dest)


def test_restore_detects_a_modified_pristine(cached, tmp_path):
    cache, key, _ = cached
    ibd = cache.path(key) / "datadir" / "sbtest" / "sbtest1.ibd"
    ibd.chmod(0o600)
    with open(ibd, "r+b") as f:
        f.write(b"oops")
    with pytest.raises(SuiteError, match="changed since it was stored"):
        cache.restore(key, tmp_path / "cell" / "datadir")


def test_store_refuses_running_server_and_duplicates(tmp_path, cached):
    cache, key, src = cached
    with pytest.raises(SuiteError, match="already cached"):
        cache.store(key, src, {})
    (src / "host.pid").write_text("123\n")
    with pytest.raises(SuiteError, match="clean shutdown"):
        cache.store(cache.key("other", SPEC), src, {})
    with pytest.raises(SuiteError, match="no mysql/ schema"):
        cache.store(cache.key("other", SPEC), tmp_path, {}, check=MYSQL.datadir_problem)


def test_unknown_key_and_foreign_root(tmp_path):
    cache = DatasetCache(tmp_path / "c")
    with pytest.raises(SuiteError, match="not cached"):
        cache.restore(cache.key("v", SPEC), tmp_path / "d")
    with pytest.raises(SuiteError, match="not one DatasetCache.key"):
        cache.has("../etc")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "photos").mkdir()
    datadir = fake_datadir(tmp_path)
    with pytest.raises(SuiteError, match="did not create") as foreign:
        cache.store(cache.key("v", SPEC), datadir, {})
    assert "photos" in str(foreign.value) and "delete" not in str(foreign.value)
    # our work directories' name, without our marker (an older version's interrupted prepare):
    # still never deleted for the user, but the message says what it is and what to do
    (tmp_path / "c" / "photos").rmdir()
    (tmp_path / "c" / ".prepare-10.11.19-3eb2fe3f16e6eb8b-23328" / "datadir").mkdir(parents=True)
    with pytest.raises(SuiteError, match="no owner marker") as leftover:
        cache.store(cache.key("v", SPEC), datadir, {})
    assert f"delete {tmp_path / 'c' / '.prepare-10.11.19-3eb2fe3f16e6eb8b-23328'}" in str(
        leftover.value
    )


def test_fingerprint_sees_size_changes(tmp_path):
    (tmp_path / "a").write_text("1")
    f1 = fingerprint(tmp_path)
    (tmp_path / "a").write_text("12")
    assert fingerprint(tmp_path) != f1


def test_restore_vs_prepare_reports_a_ratio(cached, tmp_path):
    cache, key, _ = cached
    got = restore_vs_prepare(cache, key, tmp_path / "scratch")
    assert got["prepare_s"] == 12.5 and got["restore_s"] > 0 and got["ratio"] > 1
    assert json.dumps(got) and not list((tmp_path / "scratch").glob("restore-*"))


# -- what a pristine datadir's cache key depends on (suites.datasets.prepare) -------------------------


def _suite(settings=None, tables=2):
    from types import SimpleNamespace as NS

    return NS(
        suite=NS(kind="sysbench"),
        dataset=NS(tables=tables, table_size=100),
        sysbench=NS(workloads=["oltp_ro"], scripts={}, script_options={}),
        server=NS(flavor="mariadb", settings=dict(settings or {})),
    )


def _binary(path: Path, version="10.11.6"):
    from types import SimpleNamespace as NS

    return NS(path=str(path), flavor="mariadb", version=version)


def test_cache_key_follows_settings_and_the_build(tmp_path):
    from suites.datasets.prepare import cache_key

    cache = DatasetCache(tmp_path / "cache")
    exe = tmp_path / "mariadbd"
    exe.write_bytes(b"\x7fELF build one")
    base, spec = cache_key(_suite(), _binary(exe), cache)
    assert spec["binary"]["path"] == str(exe.resolve()) and spec["binary"]["size"] == 14
    # what every pristine datadir of a stock suite was cached under before families were
    # plugins: its key is unchanged, so those caches are still found
    assert set(spec) == {"kind", "tables", "table_size", "flavor", "binary", "server_settings"}
    assert cache_key(_suite(), _binary(exe), cache)[0] == base  # stable
    # a setting that changes the on-disk format must not reuse the 16k-page datadir
    assert cache_key(_suite({"innodb_page_size": "4k"}), _binary(exe), cache)[0] != base
    assert cache_key(_suite(tables=3), _binary(exe), cache)[0] != base
    # the same version string from another build (or another path) is another dataset
    other = tmp_path / "other" / "mariadbd"
    other.parent.mkdir()
    other.write_bytes(b"\x7fELF build one")
    assert cache_key(_suite(), _binary(other), cache)[0] != base
    exe.write_bytes(b"\x7fELF build two, same version")
    assert cache_key(_suite(), _binary(exe), cache)[0] != base
    # the order settings are written in does not matter
    a = cache_key(_suite({"a": 1, "b": "x"}), _binary(exe), cache)[0]
    assert cache_key(_suite({"b": "x", "a": 1}), _binary(exe), cache)[0] == a


def test_cache_key_of_a_missing_binary_is_a_one_line_error(tmp_path):
    from suites.datasets.prepare import cache_key

    with pytest.raises(SuiteError, match="server binary .*nope.*cannot stat"):
        cache_key(_suite(), _binary(tmp_path / "nope"), DatasetCache(tmp_path / "c"))


def test_restore_to_another_filesystem(cached):
    """--out on another filesystem than the cache (the usual separate data disk): the kernel
    refuses copy_file_range across filesystem types with EXDEV; the restore must still copy every
    byte and keep holes. /dev/shm is a tmpfs; the cache is under pytest's tmp (not tmpfs here)."""
    cache, key, _ = cached
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(cache.root).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the test's tmp directory")
    dest_root = Path(os.path.realpath(shm)) / f"mallocsweep-test-{os.getpid()}"
    try:
        dest = dest_root / "datadir"
        got = cache.restore(key, dest)
        pristine = cache.path(key) / "datadir"
        assert got["method"] == "copy"
        assert digest(dest) == digest(pristine) | {OWNER_MARKER: digest(dest)[OWNER_MARKER]}
        log = dest / "ib_logfile0"
        assert log.stat().st_size == 8 << 20 and log.stat().st_blocks * 512 < 1 << 20
    finally:
        import shutil

        shutil.rmtree(dest_root, ignore_errors=True)
