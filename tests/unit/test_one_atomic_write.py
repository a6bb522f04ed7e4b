"""Every output a user or a later run relies on (run directory files, reports, comparisons, bench
figures) is written by rundir.atomic.atomic_write: temp file, fsync, rename, fsync the directory.
A plain write_text/open('w')/json.dump in the modules that write outputs is a torn file waiting
for a crash or a full disk."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The modules whose writes are outputs. (Elsewhere plain writes go to scratch places: a cell's
# work directory, sysfs, a server root being built and renamed into place, streamed logs.)
# (suites/runner/leftovers.py appends one line with O_APPEND: several runners share that registry.)
OUTPUT_WRITERS = ["analysis", "rundir", "suites/cli/commands", "bench/main.py"]
PLAIN_WRITE = re.compile(r"\.write_text\(|\.write_bytes\(|open\([^)]*['\"][wa]b?['\"]|json\.dump\(")


def test_outputs_go_through_the_one_atomic_write():
    offenders = []
    for where in OUTPUT_WRITERS:
        p = REPO / where
        for f in [p] if p.is_file() else sorted(p.rglob("*.py")):
            if f.name == "atomic.py":
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if PLAIN_WRITE.search(line):
                    offenders.append(f"{f.relative_to(REPO)}:{n}: {line.strip()}")
    assert offenders == []
