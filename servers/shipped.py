"""The files mallocsweep ships beside its code, found through importlib.resources: the data in
configs/ (allocator registry, my.cnf template, suite profiles), the C sources of the exec helper and
the preload shims (servers/exec/, servers/shims/) and the sysbench Lua wrapper
(suites/workloads/sysbench/mallocsweep.lua). An installed package (`pip install .`, not editable) has them
where pip put them; nothing is looked for at a path relative to a source checkout.

They are handed to other programs (gcc, sysbench, scp to a client host), so each is returned as a
file-system path; pip installs packages as directories, never zipped.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def shipped(package: str, *parts: str) -> Path:
    """The path of `parts` inside `package` (e.g. shipped("configs", "allocators.toml"))."""
    res = files(package).joinpath(*parts)
    if not isinstance(res, Path):  # a zipped install: no tool could open the file
        raise RuntimeError(f"{package} is not installed as files ({res}); reinstall with pip")
    return res
