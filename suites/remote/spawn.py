"""ssh running a level on a client host, as our child: the one place a level's ssh is spawned.

Both the sysbench levels (suites/workloads/sysbench/runner.py) and our Python clients' levels
(suites/workloads/pylevel.py) run this way: the records come back on ssh's stdout, its stderr is the
level's log. The remote room owns it, so no workload borrows it from another.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from servers.launch import Child, spawn

# What a level's ssh gets of our environment: a fixed PATH and locale, and the login's own
# variables ssh needs (its agent, its home for known_hosts), nothing else.
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}
_LOGIN = ("HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK")


def masked(argv: list[str]) -> list[str]:
    """argv as recorded: a client account's password never reaches the run directory."""
    return [re.sub(r"(--mysql-password=)\S*", r"\1***", a) for a in argv]


def spawn_over_ssh(
    ssh_argv: list[str], log_path: Path, rec_path: Path, cwd: Path, go_fd: int | None = None
) -> Child:
    """ssh running a level on a client host: its stdout is the records, its stderr the log.
    `go_fd`: the read end of the level's go pipe, ssh's stdin (spawn's own stdin is its launch
    gate, so a shell puts the pipe there and becomes ssh)."""
    with open(log_path, "ab") as log:
        log.write(("# mallocsweep: " + " ".join(masked(ssh_argv)) + "\n").encode())
    env = {k: v for k, v in os.environ.items() if k in _LOGIN}
    argv = ssh_argv
    if go_fd is not None:
        # bash: the pipe's descriptor may have two digits, which dash's redirections refuse
        argv = ["/bin/bash", "-c", f'exec "$@" <&{go_fd} {go_fd}<&-', "bash", *ssh_argv]
    return spawn(
        argv,
        env=_ENV | env,
        cwd=cwd,
        stdout=rec_path,
        stderr=log_path,
        death_signal=signal.SIGKILL,
        pass_fds=(go_fd,) if go_fd is not None else (),
    )
