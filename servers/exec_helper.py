"""Where our exec helper (servers/exec/msexec.c) is, and the argv that starts a child through it.

Every child of ours (servers, sysbench, the iibench and read-while-writing client processes of
suites.workloads.client_procs, the MongoDB stand-in, a server root's install tool) starts as
`msexec OPTIONS -- BINARY ARGS`: subprocess's C fork/exec runs the helper, the helper does the
child's set-up in C and execs the binary under the same pid. No Python runs between fork and exec
(the runner has threads; see the helper's header for the order of its steps).

Where it comes from, first found: MALLOCSWEEP_MSEXEC (another build, which must exist); the
environment's libexec/mallocsweep/msexec (`make setup` builds it there, with -Werror); else the
shipped source compiled once per source version into the cache (servers.thpshim.compile_once,
like the preload shims), which is how an installed package (`pip install .`) gets it: a
one-line error says to install gcc where there is no compiler.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from servers.errors import ServerError
from servers.shipped import shipped
from servers.thpshim import compile_once

SOURCE = shipped("servers", "exec", "msexec.c")
# How the cache's build is compiled (the Makefile adds -Werror for its own).
CFLAGS = ("-O2", "-Wall", "-Wextra")
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


def helper() -> str:
    """The helper's path, built from the shipped source if no build is there (see the module
    doc); ServerError saying what to do when it cannot be had."""
    override = os.environ.get("MALLOCSWEEP_MSEXEC")
    if override:
        if not _executable(Path(override)):
            raise ServerError(
                f"the exec helper {override} (MALLOCSWEEP_MSEXEC) is missing: build it with "
                f"`make setup` ({SOURCE.name}) or unset MALLOCSWEEP_MSEXEC"
            )
        return override
    venv = Path(sys.prefix) / "libexec" / "mallocsweep" / "msexec"
    if _executable(venv):
        return str(venv)
    return str(compile_once(SOURCE, "the exec helper every child starts through", CFLAGS))


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


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
