"""How far a client host's clock is from ours: NTP's idea over the shared SSH connection.

One remote shell answers a few requests with its wall clock; for each, the reply was read on the
remote between our send (t0) and our receipt (t1), so offset = remote - (t0 + t1) / 2 is wrong by
at most (t1 - t0) / 2. The round trip with the smallest delay gives the tightest bound (NTP's
minimum filter). Times the client host reports are put on our clock by subtracting the offset.
"""

from __future__ import annotations

import select
import subprocess
import time

from suites.errors import SuiteError

ROUNDS = 8
# A host that stops answering (or has no `date`) must not hang the run: each reply gets this long.
REPLY_TIMEOUT_S = 10
# Reads a line, answers with the wall clock in ns: no process is started between send and receipt.
_SCRIPT = "while read -r _; do date +%s%N; done"


def best_offset(samples: list[tuple[float, float, float]]) -> dict:
    """From (t0, remote, t1) triples, all in seconds: the offset of the minimum-delay sample."""
    if not samples:
        raise ValueError("no clock samples")
    t0, remote, t1 = min(samples, key=lambda s: s[2] - s[0])
    rtt = t1 - t0
    return {
        "offset_s": round(remote - (t0 + t1) / 2, 6),
        "uncertainty_s": round(rtt / 2, 6),
        "rtt_min_s": round(rtt, 6),
        "rtt_max_s": round(max(s[2] - s[0] for s in samples), 6),
        "samples": len(samples),
        "method": "min-rtt round trips over the ssh connection (remote date +%s%N)",
    }


def measure_offset(host, rounds: int = ROUNDS) -> dict:
    """The client host's clock minus ours (seconds), with its uncertainty."""
    p = subprocess.Popen(
        host.argv(_SCRIPT),
        env=host.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    samples = []
    try:
        for _ in range(rounds):
            t0 = time.time()
            try:
                p.stdin.write(b"\n")
                p.stdin.flush()
            except BrokenPipeError:
                break
            ready, _, _ = select.select([p.stdout], [], [], REPLY_TIMEOUT_S)
            if not ready:
                break
            line = p.stdout.readline()
            t1 = time.time()
            if not line.strip().isdigit():
                break
            samples.append((t0, int(line) / 1e9, t1))
    finally:
        try:
            p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if not samples:
        raise SuiteError(f"client host {host.target}: could not read its clock (date +%s%N)")
    return best_offset(samples)
