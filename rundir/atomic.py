"""The one way mallocsweep writes a file a user or a later run relies on.

Results, manifests, cell records, reports, comparisons and THP restore records all go through
`atomic_write`: a reader sees either the old file or the whole new one, never half of it, and after
it returns the new file survives a power cut (the file AND its directory entry are on disk).
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


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
    mode = "wb" if isinstance(data, bytes) else "w"
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
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            temps.append((tmp, path))
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
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
        for tmp, _ in temps:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
