"""A pristine datadir, prepared once per (server version, dataset spec), restored per cell.

Loading 4 x 50M rows takes hours; copying the files takes minutes. Every cell must start from
byte-identical files and a cold buffer pool, and no cell may inherit what another cell wrote.
Which server family's datadir it is does not matter here: the family says what a datadir must be
to be stored (`check`: e.g. a MySQL-family one has its mysql/ schema) and which files a restore
may hard-link (`linkable`: only files its server never writes in place).

How a restore shares data with the pristine copy, file by file:
- reflink (FICLONE) where the filesystem supports it (btrfs, XFS with reflink, bcachefs):
  copy-on-write, so a cell's writes never reach the pristine blocks. Costs almost nothing.
- a hard link only for the files the family calls linkable (the MySQL family: `*.frm` alone). A
  hard-linked file written by one cell would silently change the pristine copy and every later
  cell, so nothing is linkable unless the family says so.
- a plain copy otherwise, skipping holes (servers preallocate files; holes stay holes).

The pristine files are made read-only and fingerprinted (size + mtime of every file) when stored;
a restore refuses a pristine copy whose fingerprint changed.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

from rundir.atomic import atomic_write
from rundir.format import MARKER_TEXT, OWNER_MARKER
from suites.datasets.stale import WORK_NAME
from suites.errors import SuiteError

FICLONE = 0x40049409  # _IOW(0x94, 9, int) from linux/fs.h
META = "meta.json"
PRISTINE = "datadir"
_NO_REFLINK = {errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EPERM}


def _nothing(rel: Path) -> bool:
    return False


class DatasetCache:
    """Pristine datadirs under `cache_root`, one directory per key (marker, meta.json, datadir/).
    `linkable(relative path)`: whether a restore may hard-link that pristine file (the server
    family's rule; by default none is)."""

    def __init__(self, cache_root: Path, linkable: Callable[[Path], bool] = _nothing):
        self.root = Path(cache_root)
        self.linkable = linkable
        self._reflink_ok: bool | None = None  # learnt at the first restore

    # -- naming ------------------------------------------------------------------------------
    def key(self, server_version: str, spec: dict) -> str:
        """A stable, readable name: the server version plus a hash of the canonical spec."""
        try:
            canon = json.dumps({"server_version": server_version, "spec": spec}, sort_keys=True)
        except TypeError as e:
            raise SuiteError(f"dataset spec must be plain JSON data: {e}") from None
        slug = re.sub(r"[^A-Za-z0-9.]+", "-", str(server_version)).strip("-")[:40] or "server"
        return f"{slug}-{hashlib.sha256(canon.encode()).hexdigest()[:16]}"

    def path(self, key: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9.-]+", key):
            raise SuiteError(f"dataset key {key!r} is not one DatasetCache.key() makes")
        return self.root / key

    def has(self, key: str) -> bool:
        p = self.path(key)
        return (p / META).is_file() and (p / PRISTINE).is_dir() and (p / OWNER_MARKER).is_file()

    def meta(self, key: str) -> dict:
        try:
            return json.loads((self.path(key) / META).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise SuiteError(f"{self.path(key) / META}: unreadable dataset meta ({e})") from None

    # -- store -------------------------------------------------------------------------------
    def store(
        self,
        key: str,
        datadir: Path,
        meta: dict,
        check: Callable[[Path], str | None] | None = None,
    ) -> None:
        """Keep a pristine copy of `datadir` (whose server has shut down cleanly) under `key`.
        `check(datadir)`: why it is not a datadir of the family that made it (None: it is)."""
        datadir = Path(datadir)
        if self.has(key):
            raise SuiteError(
                f"dataset {key} is already cached in {self.path(key)}; restore it instead"
            )
        problem = check(datadir) if check is not None else None
        if problem:
            raise SuiteError(f"{datadir}: {problem}")
        running = sorted(p.name for p in datadir.glob("*.pid"))
        if running:
            raise SuiteError(
                f"{datadir}: {running[0]} exists, so its server is running or crashed; "
                "store a datadir only after a clean shutdown"
            )
        self._own_root()
        final = self.path(key)
        tmp = self.root / f".store-{key}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        (tmp / OWNER_MARKER).write_text(MARKER_TEXT)
        try:
            started = time.monotonic()
            counts = _clone_tree(datadir, tmp / PRISTINE, links=_nothing, reflink=self._reflink)
            _make_read_only(tmp / PRISTINE)
            full = dict(meta)
            full.update(
                key=key,
                stored_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                store_seconds=round(time.monotonic() - started, 3),
                store_files=counts,
                fingerprint=fingerprint(tmp / PRISTINE),
            )
            atomic_write(tmp / META, json.dumps(full, indent=2, sort_keys=True) + "\n")
            os.rename(tmp, final)  # atomic: a half-stored dataset is never seen as cached
        except BaseException:
            _remove_tree(tmp)
            raise

    def _own_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        marker = self.root / OWNER_MARKER
        if marker.is_file():
            return
        foreign = [p.name for p in self.root.iterdir() if not (p / OWNER_MARKER).is_file()]
        if foreign:
            hint = "choose an empty or mallocsweep-owned cache directory"
            if WORK_NAME.match(foreign[0]):
                # our naming, without our marker: an interrupted run of an older version (before
                # markers went last) may leave one; never removed for the user, named instead
                hint = (
                    "its name is that of mallocsweep's work directories, but it carries no owner "
                    f"marker, so it is not removed automatically: delete {self.root / foreign[0]} "
                    "if nothing of yours is in it, or " + hint
                )
            raise SuiteError(
                f"dataset cache {self.root} holds {foreign[0]!r}, which mallocsweep did not "
                f"create; {hint}"
            )
        marker.write_text(MARKER_TEXT)

    # -- restore -----------------------------------------------------------------------------
    def restore(self, key: str, dest_datadir: Path) -> dict:
        """A fresh datadir for one cell; {"method", "seconds", "files", "bytes"}.

        `dest_datadir` must not exist (or be empty): a cell never reuses a datadir that another
        cell ran writes on.
        """
        if not self.has(key):
            raise SuiteError(f"dataset {key} is not cached in {self.root}; prepare it first")
        dest = Path(dest_datadir)
        if dest.exists() and any(p.name != OWNER_MARKER for p in dest.iterdir()):
            raise SuiteError(
                f"{dest}: already holds files; a cell never reuses a datadir, restore into a new one"
            )
        src = self.path(key) / PRISTINE
        meta = self.meta(key)
        if fingerprint(src) != meta.get("fingerprint"):
            raise SuiteError(
                f"pristine dataset {src} changed since it was stored; delete {self.path(key)} "
                "and let it be prepared again"
            )
        started = time.monotonic()
        counts = _clone_tree(src, dest, links=self.linkable, reflink=self._reflink)
        _make_writable(dest)
        (dest / OWNER_MARKER).write_text(MARKER_TEXT)
        seconds = time.monotonic() - started
        bulk = "copy" if counts["copy"] else "reflink" if counts["reflink"] else "hardlink"
        return {
            "method": bulk,
            "seconds": round(seconds, 4),
            "files": counts,
            "bytes": counts.pop("bytes"),
        }

    def _reflink(self, src_fd: int, dst_fd: int) -> bool:
        """Clone src into dst if the filesystem can; remembers a refusal for the next files."""
        if self._reflink_ok is False:
            return False
        try:
            fcntl.ioctl(dst_fd, FICLONE, src_fd)
        except OSError as e:
            if e.errno in _NO_REFLINK:
                self._reflink_ok = False
                return False
            raise
        self._reflink_ok = True
        return True


# -- tree operations ---------------------------------------------------------------------------


def fingerprint(root: Path) -> str:
    """Size and mtime of every file under root: cheap enough for 50 GB, catches any write."""
    h = hashlib.sha256()
    for path in sorted(Path(root).rglob("*")):
        st = path.lstat()
        if stat.S_ISREG(st.st_mode):
            h.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _clone_tree(src: Path, dst: Path, *, links: Callable[[Path], bool], reflink) -> dict:
    counts = {"reflink": 0, "hardlink": 0, "copy": 0, "bytes": 0}
    dst.mkdir(parents=True, exist_ok=True)
    os.chmod(dst, 0o700)
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        rel_dir = here.relative_to(src)
        for d in dirnames:
            (dst / rel_dir / d).mkdir(mode=0o700)
        for name in filenames:
            s = here / name
            d = dst / rel_dir / name
            rel = rel_dir / name
            st = s.lstat()
            if not stat.S_ISREG(st.st_mode):
                raise SuiteError(f"{s}: not a regular file; a datadir to cache holds only files")
            counts["bytes"] += st.st_size
            if links(rel):
                try:
                    os.link(s, d)
                    counts["hardlink"] += 1
                    continue
                except OSError as e:
                    if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                        raise
            counts["reflink" if _copy_file(s, d, st, reflink) else "copy"] += 1
    return counts


def _copy_file(src: Path, dst: Path, st: os.stat_result, reflink) -> bool:
    """Copy one file (reflink when possible, else data ranges only); True when reflinked."""
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        if st.st_size and reflink(fi.fileno(), fo.fileno()):
            cloned = True
        else:
            cloned = False
            _copy_data_ranges(fi.fileno(), fo.fileno(), st.st_size)
    os.chmod(dst, stat.S_IMODE(st.st_mode) | stat.S_IWUSR)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    return cloned


def _copy_data_ranges(fi: int, fo: int, size: int) -> None:
    """Copy only the extents that hold data (SEEK_DATA/SEEK_HOLE); holes stay holes."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fi, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # only a hole remains
                break
            raise
        end = os.lseek(fi, start, os.SEEK_HOLE)
        _copy_range(fi, fo, start, end - start)
        pos = end
    os.ftruncate(fo, size)


# copy_file_range refuses across filesystems of different types (EXDEV since Linux 5.19: e.g. a
# cache on ext4 and --out on tmpfs or another disk, the usual layout) and on some filesystems
# (ENOSYS, EOPNOTSUPP, EINVAL): then the bytes go through our own buffer.
_NO_COPY_RANGE = {errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL}
_CHUNK = 1 << 20


def _copy_range(fi: int, fo: int, offset: int, length: int) -> None:
    """Copy `length` bytes at `offset` from fi to the same offset of fo."""
    done = 0
    while done < length:
        try:
            n = os.copy_file_range(fi, fo, length - done, offset + done, offset + done)
        except OSError as e:
            if e.errno not in _NO_COPY_RANGE:
                raise
            break
        if n == 0:  # the source ended early (it shrank): what is there has been copied
            return
        done += n
    while done < length:
        data = os.pread(fi, min(_CHUNK, length - done), offset + done)
        if not data:
            return
        view = memoryview(data)
        while view:
            written = os.pwrite(fo, view, offset + done)
            view = view[written:]
            done += written


def _make_read_only(root: Path) -> None:
    """Pristine files lose their write bits: a stray write by a non-root user fails loudly."""
    for path in Path(root).rglob("*"):
        if path.is_file():
            path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)


def _make_writable(root: Path) -> None:
    """Restored copies are the cell's own: writable, except hard links (shared with pristine)."""
    for path in Path(root).rglob("*"):
        if path.is_file() and path.stat().st_nlink == 1:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | stat.S_IWUSR)


def _remove_tree(path: Path) -> None:
    """Remove a half-written store, write bits first (pristine files are read-only)."""
    if not path.exists():
        return
    for p in path.rglob("*"):
        if p.is_file():
            p.chmod(0o600)
    shutil.rmtree(path, ignore_errors=True)


def restore_vs_prepare(cache: DatasetCache, key: str, scratch: Path, repeats: int = 3) -> dict:
    """For `make bench`: timed restores of `key` into `scratch` (removed after each) against the
    seconds its sysbench prepare took (from meta); ratio = prepare_s / median restore_s.

    Dirty pages are flushed (os.sync) before each timing: right after a store, writeback of the
    freshly written pristine copy throttles the next copy 5-10x, which is not what a cell pays
    once the cache has settled. The restore itself is timed until its files are in place (not
    fsynced): that is when the cell's server can start.
    """
    meta = cache.meta(key)
    prepare_s = meta.get("prepare_s")
    times, got = [], {}
    for i in range(max(1, repeats)):
        dest = Path(scratch) / f"restore-{os.getpid()}-{i}"
        os.sync()
        try:
            got = cache.restore(key, dest)
        finally:
            shutil.rmtree(dest, ignore_errors=True)
        times.append(got["seconds"])
    median = sorted(times)[len(times) // 2]
    ratio = prepare_s / median if prepare_s and median > 0 else None
    return {
        "prepare_s": prepare_s,
        "restore_s": median,
        "restore_runs_s": times,
        "method": got["method"],
        "bytes": got["bytes"],
        "ratio": round(ratio, 1) if ratio else None,
    }
