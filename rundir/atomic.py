"""The one way mallocsweep writes a file a user or a later run relies on.

Results, manifests, cell records, reports, comparisons and THP restore records all go through
`atomic_write`: a reader sees either the old file or the whole new one, never half of it, and after
it returns the new file survives a power cut (the file AND its directory entry are on disk).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path


def utf8(text: str) -> bytes:
    """`text` as UTF-8, whatever it holds. A path with bytes that are not UTF-8 (a directory named
    under another locale) reaches Python's strings as lone surrogates (PEP 383), which UTF-8
    cannot encode: a report naming such a run directory once died with an internal error. Those
    bytes are written as `\\xNN` (readable, and the file stays valid UTF-8)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte made
        return text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace").encode("utf-8")


def _fsync_dir(directory: Path) -> None:
    # The rename is an entry of the directory: without this fsync a crash can lose the new name
    # even though the file's data was synced.
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link_or_move(tmp: str, path: Path) -> None:
    """Move tmp to path unless path exists. A hard link makes that check and the move one atomic
    step; on a filesystem without hard links (EPERM/ENOTSUP), check then rename: a writer racing
    for the same name in that window is the only case it misses."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if path.exists():
            raise FileExistsError(errno.EEXIST, "File exists", str(path)) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def atomic_write(path: Path, data: str | bytes, *, exclusive: bool = False) -> None:
    """Write `data` to `path` through a temp file in the same directory, fsync it, move it into
    place and fsync the directory.

    exclusive=True never replaces an existing file: FileExistsError if `path` exists (the move is
    a hard link, which the kernel refuses atomically when the name is taken, so two writers
    racing for one name cannot both win). Other OSErrors propagate; the temp file never stays.
    """
    path = Path(path)
    # Our files are UTF-8 whatever the locale (under LC_ALL=C a summary naming "é" or "×" once
    # died half-written with UnicodeEncodeError): text is encoded here, never by the locale.
    if isinstance(data, str):
        data = utf8(data)
    mode = "wb"
    if exclusive and path.exists():  # fail before writing anything; the link below decides races
        raise FileExistsError(errno.EEXIST, "File exists", str(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file private (0600); results are readable like the report beside them.
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, mode) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            _link_or_move(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def _discard(paths: list[str]) -> None:
    """Remove our temp and backup files; one already gone (moved into place) is fine."""
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def _staged(path: Path, data: str | bytes) -> str:
    """`data` (text as UTF-8) in a new fsynced temp file beside `path` (0644, as the results
    beside it); its name. An OSError names `path`, the file we meant to write, not the temp."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(utf8(data) if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def atomic_write_all(files: list[tuple[Path, str | bytes]]) -> None:
    """Write several new files all or nothing (a comparison's .md and .html): every one goes to a
    temp file in its directory and is fsynced first; only then are they moved into place, each
    exclusively. FileExistsError if a name is taken, any OSError if a write or a move fails: in
    both cases the files this call moved are removed again and no temp file stays."""
    temps: list[tuple[str, Path]] = []
    placed: list[Path] = []
    try:
        for path, data in files:
            path = Path(path)
            if path.exists():
                raise FileExistsError(errno.EEXIST, "File exists", str(path))
            temps.append((_staged(path, data), path))
        for tmp, path in temps:
            _link_or_move(tmp, path)
            placed.append(path)
        for directory in dict.fromkeys(p.parent for _, p in temps):
            _fsync_dir(directory)
    except BaseException:
        for path in placed:
            try:
                os.unlink(path)
            except OSError:
                pass
        raise
    finally:
        _discard([tmp for tmp, _ in temps])


def _special(path: Path) -> str | None:
    """Why `path` cannot be replaced by a file of ours: a directory, a FIFO, a device."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return "is a directory"
    if stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode):
        return None
    return "is a special file (a FIFO, socket or device)"


def atomic_replace_all(files: list[tuple[Path, str | bytes]]) -> None:
    """Replace several files together (a report's report.html, summary.md and verdicts.csv):
    afterwards all are new, or, when any cannot be written, all are as they were.

    Every new file is written to a temp file in its directory and fsynced first; every target is
    checked (a directory or a special file in its place is refused); every existing target is
    hard-linked to a backup name (which fails for an immutable or append-only file, before
    anything is replaced); only then is each moved into place. If a move still fails, the files
    moved so far get their backups back (or are removed when they did not exist). OSError (with
    the failing path as its filename) in every failing case; no temp or backup file stays."""
    temps: list[tuple[str, Path]] = []
    backups: dict[Path, str] = {}
    placed: list[Path] = []
    try:
        for path, data in files:
            path = Path(path)
            why = _special(path)
            if why:
                code = errno.EISDIR if why == "is a directory" else errno.EINVAL
                raise OSError(code, why, str(path))
            temps.append((_staged(path, data), path))
        for _, path in temps:
            if os.path.lexists(path):
                backup = tempfile.mktemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent)
                os.link(path, backup, follow_symlinks=False)
                backups[path] = backup
        for tmp, path in temps:
            os.replace(tmp, path)
            placed.append(path)
        for directory in dict.fromkeys(p.parent for _, p in temps):
            _fsync_dir(directory)
    except BaseException:
        for path in placed:  # put back what was there
            try:
                if path in backups:
                    os.replace(backups.pop(path), path)
                else:
                    os.unlink(path)
            except OSError:
                pass
        raise
    finally:
        _discard([tmp for tmp, _ in temps] + list(backups.values()))
