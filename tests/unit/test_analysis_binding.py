"""The report's allocator proof from binding evidence recorded on a real process: the gcc-built
program that links tcmalloc_minimal, run once with jemalloc preloaded and once as 'builtin'
(tests/fixtures/binding/linked-tcmalloc-program.json, written by servers.verify.verify_allocator).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.make_runs import make_run

from analysis import cell_tables
from analysis.report import write_report
from rundir.read import load_run

RECORDED = json.loads(
    (
        Path(__file__).parent.parent / "fixtures" / "binding" / "linked-tcmalloc-program.json"
    ).read_text()
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A synthetic run whose jemalloc and tcmalloc cells carry the recorded verification."""
    path = make_run(tmp_path_factory.mktemp("b"), "synthetic-binding", seed=7)
    manifest = json.loads((path / "manifest.json").read_text())
    for c in manifest["cells"]:
        name = c["allocator"]["name"]
        if name == "jemalloc":
            c["verification"] = RECORDED["jemalloc"]
        elif name == "tcmalloc":
            c["verification"] = RECORDED["builtin"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def _row(table, allocator_prefix):
    i = table.columns.index("allocator")
    return {
        col: cell.text
        for row in table.rows
        if row[i].text.startswith(allocator_prefix)
        for col, cell in zip(table.columns, row, strict=True)
    }


def test_proof_table(run):
    table = cell_tables.proof_table(load_run(run))
    je = _row(table, "jemalloc")
    assert je["malloc/free bound to"] == (
        "libjemalloc.so.2 (also mapped, serving nothing: libtcmalloc_minimal.so.4.5.10)"
    )
    builtin = _row(table, "builtin: tcmalloc")
    assert builtin["allocator"] == RECORDED["builtin"]["builtin"]["label"]
    assert builtin["malloc/free bound to"] == "libtcmalloc_minimal.so.4.5.10"
    glibc = _row(table, "glibc")
    assert glibc["malloc/free bound to"] == ""  # synthetic cell without binding: nothing claimed


def test_binding_table_lists_got_target_and_library_per_symbol(run):
    table = cell_tables.binding_table(load_run(run))
    rows = [[c.text for c in r] for r in table.rows]
    je = [r for r in rows if "__jemalloc__" in r[0]]
    entries = RECORDED["jemalloc"]["binding"]["entries"]
    for sym in ("malloc", "free"):
        e = next(e for e in entries if e["symbol"] == sym and e["object"].endswith("/linked"))
        assert ["linked", sym, e["got"], e["target"], e["library"]] in [r[1:] for r in je]
    # The rest of the family grouped by where it went; lazy entries say 'unbound'.
    assert any(r[1].startswith("libstdc++") and r[5] == "unbound" for r in je)
    # Under the preload nothing at all is bound into the linked tcmalloc.
    assert je and not any("tcmalloc" in r[5] for r in je)
    builtin = [r for r in rows if "__tcmalloc__" in r[0]]
    assert builtin and all("jemalloc" not in r[5] for r in builtin)
    assert not [r for r in rows if "__glibc__" in r[0]]  # no binding recorded, no rows


def test_report_html_carries_the_binding(run):
    html_path, _ = write_report(run)
    html = html_path.read_text()
    assert 'id="binding"' in html and "Malloc binding per cell" in html
    assert RECORDED["builtin"]["builtin"]["label"] in html
