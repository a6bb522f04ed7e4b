"""The tune's output directory: created new (or an empty one), marked by tune.json, never an
existing directory of the user's; resumed only with the same tune (same suite file, allocator,
search space, rounds and seed), each difference named in one line.

Inside it: tune.json (what is tuned, how), study.journal (optuna's journal: every trial, so a
killed tune resumes), trials/NNNN/<run> (each trial's run directory), confirm/<run> (the final
paired run on fresh lives), and at the end pareto.csv, pareto.png, recommendation.txt and the
files a DBA installs (dropin.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from rundir.atomic import atomic_write
from suites.errors import SuiteError

MARKER = "tune.json"
KIND = "mallocsweep-tune"
# What must be the same for a resume to continue the same study.
SAME = ("suite_sha256", "allocator", "space", "rounds", "seed", "server")


def prepare(out: Path, settings: dict, resume: bool) -> dict:
    """The tune's recorded settings (tune.json), creating the directory for a new tune."""
    out = Path(out)
    marker = out / MARKER
    if resume:
        if not marker.is_file():
            raise SuiteError(f"--resume --out {out}: not a tune directory (no {MARKER})")
        try:
            recorded = json.loads(marker.read_text())
        except (OSError, ValueError) as e:
            raise SuiteError(f"{marker}: unreadable ({e}); not resumable") from None
        if not isinstance(recorded, dict) or recorded.get("kind") != KIND:
            raise SuiteError(f"{marker}: not a mallocsweep tune record")
        for key in SAME:
            if recorded.get(key) != settings.get(key):
                raise SuiteError(
                    f"--resume --out {out}: {key} differs from the tune it holds "
                    f"({_short(recorded.get(key))} there, {_short(settings.get(key))} now); "
                    "resume with the same suite, allocator, --space and --seed"
                )
        return recorded
    if out.exists() or out.is_symlink():
        if marker.is_file():
            raise SuiteError(
                f"--out {out}: holds a tune already; continue it with --resume, or give a new "
                "directory"
            )
        if not out.is_dir() or any(out.iterdir()):
            raise SuiteError(
                f"--out {out}: exists and is not a tune directory; refusing to write into it "
                "(give a new or empty directory)"
            )
    out.mkdir(parents=True, exist_ok=True)
    record = {"kind": KIND, **settings}
    atomic_write(marker, json.dumps(record, indent=2, sort_keys=True) + "\n", exclusive=True)
    return record


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."
