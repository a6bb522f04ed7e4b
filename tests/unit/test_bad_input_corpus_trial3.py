"""The bad-input corpus, continued for what issue 35's third trial found short: damage in an
alternate-design run's raw blocks that a `report --rederive` took in silence (a NaN, negative or
1e300 interval rate, an infinity refused only after results.csv was rewritten), a row relabelled
to another server, impossible percentiles, and shards whose servers ran with other settings.

Same machinery as tests/unit/test_bad_input_corpus.py (its module doc: each case one line, run in
a forked child through the real CLI, one line on stderr naming the file/field/value, nothing of
the sandbox changed beyond the outputs a case names: for a refused --rederive, nothing at all).
What a case cannot say in one line (a verdict's rounds after a rederive, a resume of the recorded
alternate run) is a test below the cases.
"""

from __future__ import annotations

import pytest

from tests.unit import test_bad_input_corpus as corpus
from tests.unit.test_bad_input_corpus import (
    F3_CELLS,
    REPORT_FILES,
    C,
    edit_json,
    record,
    set_val,
)

F3C0, F3C1 = F3_CELLS
# real-alternate-aa's cells: glibc and glibc-aa, rounds 1-3
AA_ARM = "mariadb-10.11.19__glibc-aa__thp-system__r{}"
GLIBC = "mariadb-10.11.19__glibc__thp-system__r{}"
SERVER_B = "b_mariadb-10.11.19__jemalloc__thp-system__r2"


# -- damage -----------------------------------------------------------------------------------
def alt_row(cell: str, **values):
    return edit_json(f"ALT/cells/{cell}.json", lambda r: r["rows"][0].update(values))


def rows_of(run: str, cell: str, **values):
    """Every row of a cell record relabelled (a row's identity edited by hand)."""
    return edit_json(f"{run}/cells/{cell}.json", lambda r: [x.update(values) for x in r["rows"]])


def raw_identity(i: int, **values):
    return edit_json(f"F3/raw/{F3_CELLS[i]}.json", lambda d: d["identity"].update(values))


A = AA_ARM.format

# fmt: off
CLASSES: dict[str, list[C]] = {
    # each figure in the range its schema declaration gives; a distribution's figures in order
    "ranges-and-order": [
        C("t3-report-p95-above-p99", "report {ALT}", 2, rf"cell {GLIBC.format(2)}, point_select@4: lat_p95_ms 50\.0 is above lat_p99_ms 0\.1 \(out of order: .*\) in cells/{GLIBC.format(2)}\.json, so this point is not used", alt_row(GLIBC.format(2), lat_p95_ms=50.0, lat_p99_ms=0.1)),
        C("t3-report-p99-above-max", "report {F3}", 2, rf"cell {F3C0}, oltp_ro@4: lat_p99_ms 500\.0 is above lat_max_ms 1\.0", record("F3", 0, lambda r: r["rows"][0].update(lat_p99_ms=500.0, lat_p999_ms=None, lat_max_ms=1.0))),
        C("t3-report-f1-p50-above-p95", "report {F1}", 2, r"oltp_ro@4: lat_p50_ms 90\.0 is above lat_p95_ms \S+ .* in results\.csv", set_val("F1", "lat_p50_ms", "90")),
        C("t3-report-qps-absurd", "report {F3}", 2, rf"cell {F3C0}, oltp_ro@4: qps 1e\+300 is not a throughput \(it must be at most 1e\+09\)", record("F3", 0, lambda r: r["rows"][0].update(qps=1e300))),
        C("t3-report-steady-absurd", "report {ALT}", 2, r"steady_qps 1\.58e\+152 is not a rate \(it must be at most 1e\+09\)", alt_row(A(3), steady_qps=1.58e152)),
        C("t3-report-client-busy-pct", "report {F3}", 2, r"client_cpu_busy_pct 150\.0 is not a percentage \(it must be at most 100\)", record("F3", 1, lambda r: r["rows"][0].update(client_cpu_busy_pct=150.0))),
        C("t3-report-settled-two", "report {F3}", 2, r"settled 2(\.0)? is not 0 or 1 \(it must be at most 1\)", record("F3", 0, lambda r: r["rows"][0].update(settled=2))),
        C("t3-report-allow-p95-above-p99", "report {ALT} --allow-incomplete", 0, r"INCOMPLETE RUN \S+: cell \S+, point_select@4: lat_p95_ms 50\.0 is above lat_p99_ms", alt_row(GLIBC.format(2), lat_p95_ms=50.0, lat_p99_ms=0.1), out=REPORT_FILES, lines=None),
    ],
    # a row is its cell's: server, allocator, THP mode, engine as the cell record says
    "row-identity": [
        C("t3-report-row-server-relabelled", "report {AA}", 2, rf"cells/{SERVER_B}\.json: level point_select@4: server 'a', but the cell record says the cell ran 'b:mariadb-10\.11\.19': a relabelled row would count under another arm", rows_of("AA", SERVER_B, server="a")),
        C("t3-report-row-allocator-relabelled", "report {F3}", 2, rf"cells/{F3C1}\.json: level oltp_ro@4: allocator 'glibc', but the cell record says the cell ran 'jemalloc'", rows_of("F3", F3C1, allocator="glibc")),
        C("t3-report-row-engine-relabelled", "report {F3}", 2, rf"cells/{F3C0}\.json: level oltp_ro@4: engine 'rocksdb', but the cell record says the cell ran 'innodb'", rows_of("F3", F3C0, engine="rocksdb")),
        C("t3-report-row-version-relabelled", "report {ALT}", 2, rf"cells/{GLIBC.format(1)}\.json: level point_select@4: server_version '11\.4\.2', but the cell record says the cell ran '10\.11\.19'", rows_of("ALT", GLIBC.format(1), server_version="11.4.2")),
        C("t3-report-f1-row-server-relabelled", "report {F1}", 2, r"results\.csv line 2 \(cell \S+, oltp_ro@4\): server 'other', but manifest\.json's cell ran 'mariadb-10\.11\.19'", set_val("F1", "server", "other")),
        C("t3-compare-row-server-relabelled", "compare {AA} {s}/AA2", 2, rf"AA: incomplete run: cells/{SERVER_B}\.json: level point_select@4: server 'a'", rows_of("AA", SERVER_B, server="a"), corpus.copy("AA", "AA2")),
        C("t3-rederive-raw-server-relabelled", "report {F3} --rederive", 0, rf"could not derive 1 cell\(s\) again \(raw record unusable\): {F3C1}", raw_identity(1, server="other"), out=[*REPORT_FILES, "F3/derived", "F3/derived/*", "F3/results.csv"], lines=None, says=r"its identity\.server is 'other', the cell ran 'mariadb-10\.11\.19'"),
    ],
}
# fmt: on
CASES = [c for cases in CLASSES.values() for c in cases]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, tmp_path):
    corpus.check_case(case, tmp_path / "s")


def test_case_ids_are_unique_across_the_corpora():
    from tests.unit import test_bad_input_corpus_issue35 as issue35
    from tests.unit import test_bad_input_corpus_trial2 as trial2

    ids = [c.id for c in (*corpus.CASES, *issue35.CASES, *trial2.CASES, *CASES)]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_every_class_has_cases():
    assert all(len(cases) >= 3 for cases in CLASSES.values()), {
        k: len(v) for k, v in CLASSES.items()
    }
