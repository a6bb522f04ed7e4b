"""A load client for tests/unit/test_client_procs.py: what it does is in its work description.

Runs inside a client process started by suites.workloads.client_procs (or a thread of the test): it reports
what the process looks like from inside (its parent-death signal, its process group) and claims
keys from the board the way iibench's inserters do.
"""

from __future__ import annotations

import ctypes
import os
import signal

PR_GET_PDEATHSIG = 2


def _pdeathsig() -> int:
    sig = ctypes.c_int(0)
    ctypes.CDLL(None, use_errno=True).prctl(PR_GET_PDEATHSIG, ctypes.byref(sig), 0, 0, 0)
    return sig.value


def client_main(link) -> None:
    do = link.work["do"]
    if do == "raise":
        raise RuntimeError("no such table: probe\nsecond line")
    if do == "die" and link.number == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    link.ready()
    if not link.wait_go(30):
        return
    keys = []
    while not link.stopped():
        first, n = link.board.claim(7, link.work["limit"])
        if n == 0:
            break
        keys.append((first, n))
        link.board.slots[link.number] += n
    link.done(
        {
            "claims": keys,
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "pgid": os.getpgid(0),
            "pdeathsig": _pdeathsig(),
            "t0": link.t0,
            "cpu_s": link.cpu_s(),
            "blob": b"\x00\xffbytes",
        }
    )
    link.wait_stop(30)
