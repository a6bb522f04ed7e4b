"""Warnings a server wrote to its error log about the settings it was given.

A server that does not know a setting, cannot take its value, or adjusts it, says so in its
error log and starts anyway: the run exits 0 and the figures describe a server configured
otherwise than the suite says ("unknown variable 'x=1'", "option 'y': boolean value 'maybe'
wasn't recognized. Set to OFF", "... adjusted to ..."). Each cell keeps its server's error log
(logs/<cell>/error.log); the report and summary.md list such lines once each, with the cells
they came from. Lines that every run here shows and that say nothing about the suite's settings
(aborted client connections at a level's end, the grant tables' host names under
skip-name-resolve) are not listed.
"""

from __future__ import annotations

import re

from rundir.read import Run
from rundir.regular import read_regular

ERROR_LOG = "error.log"
# What a server says about a setting it did not take as given
ABOUT_SETTINGS = re.compile(
    r"unknown (variable|option)|option '[^']+'|Set to (ON|OFF)|adjusted to|ignoring option|"
    r"is deprecated|invalid value|wasn't recognized|not recognized",
    re.IGNORECASE,
)
NOT_ABOUT_SETTINGS = re.compile(r"skip-name-resolve|Aborted connection", re.IGNORECASE)
# A server's own timestamp, thread id and tag at the start of a line: dropped so that the same
# warning of several lives reads as one
PREFIX = re.compile(r"^\S+ \S+ \d+ \[Warning\] ")
MAX_LOG_BYTES = 4 << 20  # the start of a very long log (its warnings come at start-up)
MAX_LISTED = 10


def setting_warnings(run: Run) -> list[str]:
    """One line per distinct warning about settings, with the cells whose server wrote it."""
    found: dict[str, list[str]] = {}
    for cid, cell in run.cells.items():
        logs = cell.get("logs_dir") or f"logs/{cid}"
        path = run.path / str(logs) / ERROR_LOG
        try:
            text = read_regular(path)[:MAX_LOG_BYTES].decode("utf-8", "replace")
        except OSError:
            continue  # no log kept (an older run, a cell that never started)
        for line in text.splitlines():
            if "[Warning]" not in line and "[WARNING]" not in line:
                continue
            if not ABOUT_SETTINGS.search(line) or NOT_ABOUT_SETTINGS.search(line):
                continue
            text_ = PREFIX.sub("", line).strip()
            found.setdefault(text_, []).append(cid)
    out = []
    for text, cells in list(found.items())[:MAX_LISTED]:
        where = f"cell {cells[0]}" if len(cells) == 1 else f"{len(cells)} cells, e.g. {cells[0]}"
        out.append(
            f"The server warned about its settings ({where}): {text} — it ran otherwise than the "
            "suite says; check server.settings"
        )
    if len(found) > MAX_LISTED:
        out.append(f"... and {len(found) - MAX_LISTED} more warning(s) about settings")
    return out
