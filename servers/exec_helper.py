"""Where our exec helper (servers/exec/msexec.c) is, and the argv that starts a child through it.

Every child of ours (servers, sysbench, the iibench and read-while-writing client processes of
suites.client_procs, the MongoDB stand-in, a server root's install tool) starts as
`msexec OPTIONS -- BINARY ARGS`: subprocess's C fork/exec runs the helper, the helper does the
child's set-up in C and execs the binary under the same pid. No Python runs between fork and exec
(the runner has threads; see the helper's header for the order of its steps).

`make setup` builds it into the virtual environment (VENV/libexec/mallocsweep/msexec);
MALLOCSWEEP_MSEXEC names another build.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from servers.errors import ServerError

SOURCE = Path(__file__).resolve().parent / "exec" / "msexec.c"
# Where the environment's LD_PRELOAD travels to the helper, which sets it only at the last exec.
PRELOAD_VAR = "MS_PRELOAD"
# The helper's own exit statuses (before it execs anything): what each one means.
STATUS = {
    96: "could not enter the server root (namespace, mount or chroot failed)",
    97: "the runner gave up before the start",
    98: "the runner exited before the start",
    99: "bad set-up of the exec helper",
    127: "the binary could not be executed",
}


def helper_path() -> Path:
    override = os.environ.get("MALLOCSWEEP_MSEXEC")
    if override:
        return Path(override)
    return Path(sys.prefix) / "libexec" / "mallocsweep" / "msexec"


def helper() -> str:
    """The helper's path; ServerError saying how to build it when it is missing."""
    path = helper_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ServerError(
            f"the exec helper {path} is missing: run `make setup` (it builds {SOURCE.name})"
        )
    return str(path)


def helper_argv(
    argv: Sequence[str],
    *,
    parent: int,
    death_signal: int,
    thp_disable: bool = False,
    gate: bool = True,
    rlimits: Mapping[str, int] | None = None,
    root: str | None = None,
    binds: Sequence[str] = (),
    chdir: str | None = None,
) -> list[str]:
    out = [helper(), "--pdeathsig", str(int(death_signal)), "--parent", str(parent)]
    out += ["--preload-var", PRELOAD_VAR]
    if thp_disable:
        out.append("--thp-disable")
    if gate:
        out.append("--gate")
    for name, value in (rlimits or {}).items():
        out += ["--rlimit", f"{name}={int(value)}"]
    if root is not None:
        out += ["--root", root]
        for b in binds:
            out += ["--bind", b]
    if chdir is not None:
        out += ["--chdir", chdir]
    return [*out, "--", *argv]
