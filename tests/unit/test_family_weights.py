"""One run, one 5%, weighted by exposure (analysis/verdicts.py "One run, one 5%"): a point the
allocator's exposure settles weighs a tenth of a tested one, so the points where the allocator
can matter keep nearly all of the 5%, and the shares still sum to 5%."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis import exposure, verdicts
from analysis.sequential import Design
from analysis.verdict_tables import _level_text
from analysis.verdicts import SETTLED_WEIGHT, family_weights, run_verdicts
from rundir.read import load_run

RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "real-servers-aa-format5"
BOUND = {
    "small": {"ns": 6.0, "threads": 2, "cheapest": "tcmalloc", "dearest": "tbbmalloc"},
    "large": {"ns": 70.0, "threads": 1, "cheapest": "tcmalloc", "dearest": "jemalloc"},
}


def _row(workload, calls, bytes_per_query, cpu_us):
    return {
        "workload": workload, "server": "m", "thp": "system", "threads": 8, "allocator": "glibc",
        "repeat": 1, "cell": f"glibc-{workload}", "malloc_calls_per_query": calls,
        "free_calls_per_query": calls, "malloc_bytes_per_query": bytes_per_query,
        "malloc_calls_per_txn": calls, "cpu_us_per_op": cpu_us,
    }  # fmt: skip


def _run(rows):
    return SimpleNamespace(
        manifest={"call_cost": {"bound": BOUND}}, ok_rows=rows, is_standin=lambda cell: False
    )


OLTP, POINT = ("m", "oltp_ro", "system", 8), ("m", "point_select", "system", 8)
# MariaDB 10.11 as measured: OLTP_RO ~2.3 calls asking ~227 kB (the allocator can matter), a
# point select ~1 call of ~100 B in 13 us (it cannot)
ROWS = [_row("oltp_ro", 2.26, 227e3, 22.0), _row("point_select", 1.0, 100.0, 13.0)]


def test_a_settled_point_weighs_a_tenth_and_the_shares_sum_to_the_five_percent():
    run = _run(ROWS)
    assert exposure.cannot_matter(run, POINT) and not exposure.cannot_matter(run, OLTP)
    w = family_weights(run, [OLTP, POINT])
    assert w == {OLTP: 1.0, POINT: SETTLED_WEIGHT}
    d, total = Design(3, 3), sum(w.values())
    assert d.share(w[OLTP], total).alpha + d.share(w[POINT], total).alpha == pytest.approx(0.05)
    # the tested point gets more of the 5% than an equal share would give it
    assert d.share(w[OLTP], total).alpha > d.shared_by(2).alpha


def test_all_settled_or_none_settled_is_equal_shares():
    assert set(family_weights(_run(ROWS[1:]), [POINT]).values()) == {1.0}
    unbounded = SimpleNamespace(manifest={}, ok_rows=ROWS, is_standin=lambda cell: False)
    assert set(family_weights(unbounded, [OLTP, POINT]).values()) == {1.0}


def test_share_refuses_weights_that_are_not_a_part_of_the_total():
    with pytest.raises(ValueError):
        Design(3, 3).share(2.0, 1.0)
    with pytest.raises(ValueError):
        Design(3, 3).share(0.0, 1.0)


def test_the_judged_levels_follow_the_weights(monkeypatch):
    """A recorded run with two throughput points (one per server), both judged at 97.5% with
    equal shares; with one of them settled by its exposure, the other is judged at
    1 - 5% / 1.1 and the settled one at 1 - 0.5% / 1.1."""
    run = load_run(RUN)
    before = {v.server: v.level for v in run_verdicts(run) if v.metric == "throughput"}
    assert len(before) == 2 and all(x == pytest.approx(0.975) for x in before.values())
    settled = "a:mariadb-10.11.19"
    monkeypatch.setattr(verdicts.exposure, "cannot_matter", lambda _run, p: p[0] == settled)
    tp = [v for v in run_verdicts(run) if v.metric == "throughput"]
    after = {v.server: v.level for v in tp}
    total = 1 + SETTLED_WEIGHT
    assert after[settled] == pytest.approx(1 - 0.05 * SETTLED_WEIGHT / total)
    assert after["b:mariadb-10.11.19"] == pytest.approx(1 - 0.05 / total)
    # the settled point's undecided verdict says why, and the report's note says it weighs less
    assert [v.verdict for v in tp if v.server == settled] == [exposure.CANNOT_MATTER]
    assert "the 1 the allocator cannot matter at weighing a tenth" in _level_text(tp)
