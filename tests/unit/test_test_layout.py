"""Test modules are imported by basename (no packages under tests/unit and tests/integration), so
two modules of one name in the two folders fail collection under xdist, and only there: it
happened twice (test_kit, test_alternate_design) before this check."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_module_name_is_in_both_folders():
    unit = {p.name for p in (TESTS / "unit").glob("test_*.py")}
    integration = {p.name for p in (TESTS / "integration").glob("test_*.py")}
    assert unit and integration
    assert unit & integration == set()
