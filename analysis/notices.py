"""What the manifest says went wrong or needs care, in sentences a reader sees before any figure.

- run_problems: the run as a whole — THP could not be restored (the machine may still run with the
  mode the run set), the run failed or was interrupted, stale work removed when it was resumed.
  Shown at the very top of report.html and summary.md.
- server_warnings: each server's own warnings (cells[].server.warnings, e.g. a MongoDB THP setup
  that goes against MongoDB's advice), deduplicated, with the cells they concern.
- thp_advice: MongoDB's THP advice for the server version (cells[].server.thp_advice), shown next
  to the THP section.
"""

from __future__ import annotations

from rundir.read import Run


def _cells_text(run: Run, cell_ids: list[str]) -> str:
    if len(cell_ids) == len(run.cells) and len(cell_ids) > 1:
        return f"all {len(cell_ids)} cells"
    return ("cell " if len(cell_ids) == 1 else "cells ") + ", ".join(cell_ids)


def _by_text(run: Run, key: str) -> dict[str, list[str]]:
    """Distinct texts of cells[].server.<key> (a string or a list of strings) -> cells, in order."""
    out: dict[str, list[str]] = {}
    for cid, c in run.cells.items():
        value = (c.get("server") or {}).get(key)
        items = value if isinstance(value, list) else [value]
        for text in items:
            if isinstance(text, str) and text.strip():
                out.setdefault(text.strip(), []).append(cid)
    return out


def server_warnings(run: Run) -> list[str]:
    """Each distinct server warning once, naming the cells it was raised in."""
    return [
        f"Server warning ({_cells_text(run, cells)}): {text}"
        for text, cells in _by_text(run, "warnings").items()
    ]


def thp_advice(run: Run) -> list[str]:
    """MongoDB's THP advice for each server version the run started, with its cells."""
    return [
        f"{text} ({_cells_text(run, cells)})" for text, cells in _by_text(run, "thp_advice").items()
    ]


def run_problems(run: Run) -> list[str]:
    m = run.manifest
    out = list(run.notices)  # what reading the run directory found damaged and rebuilt
    if m.get("thp_restore_error"):
        out.append(
            f"THP was left changed after this run — {str(m['thp_restore_error']).rstrip('.')}."
            " Until it is put back, this machine runs with the THP setting the run left behind,"
            " and every later measurement on it is affected."
        )
    done = sum(1 for c in run.cells.values() if c.get("status") == "ok")
    finished = f"{done} of {len(run.cells)} cells finished"
    if run.status == "failed":
        why = m.get("error") or "no reason recorded"
        out.append(
            f"The run FAILED and stopped early ({finished}): {why}. Only the cells that finished"
            " before it stopped are reported."
        )
    if run.status == "interrupted" or m.get("interrupted_by"):
        by = f" by {m['interrupted_by']}" if m.get("interrupted_by") else ""
        out.append(
            f"The run was INTERRUPTED{by} ({finished}). Finish it with `mallocsweep run"
            f" {m.get('suite_file') or 'SUITE.toml'} --resume {run.path}`: finished cells are"
            " kept, the rest run again."
        )
    # a soak's broken cells did not run again: their cycles were kept from their checkpoints
    # and the soak went on in new lives (the soak notice below says where it broke)
    stale = [s for s in m.get("stale_work_removed") or [] if not run.cell(str(s)).get("soak")]
    soak = m.get("soak") or {}
    broken = [
        (cid, c["soak"])
        for cid, c in run.cells.items()
        if (c.get("soak") or {}).get("broken_after") or (c.get("soak") or {}).get("cycles") == 0
    ]
    if soak.get("seconds") and broken:
        where = "; ".join(
            f"{cid} after {s.get('broken_after') or 'no cycle'} ({s.get('ended')})"
            for cid, s in broken
        )
        out.append(
            f"This soak's series BROKE and continued in new server lives (segments): {where}. "
            "Each segment's growth is fitted on its own (a fresh server starts its memory "
            "again) and an arm's segments are pooled; the per-cycle plots mark each new life."
        )
    if soak.get("stopped"):
        out.append(f"The soak ended: {soak['stopped']}.")  # "its time was up (2.00 h)", ...
    if stale:
        out.append(
            f"When this run was resumed, work directories an earlier attempt left behind were"
            f" removed for {len(stale)} cell(s) ({', '.join(str(s) for s in stale)}); those cells"
            " ran again from the start, so what they show comes from a fresh server life."
        )
    return out
