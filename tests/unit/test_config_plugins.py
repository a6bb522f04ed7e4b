"""The suite model is assembled from the plugins: each workload declares its sections, options and
limits, each server family its [server] refusals; the config core branches on neither."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from suites.config.errors import models_of
from suites.errors import SuiteError
from suites.families.registry import FAMILIES
from suites.suite.model import Suite, SuiteInfo, template_settings
from suites.suite.overrides import apply_overrides
from suites.workloads.registry import REGISTRY
from tests.unit.branch_census import branches, census

REPO = Path(__file__).resolve().parents[2]
# The modules that read suite files and options: every workload or family rule is a plugin's.
CONFIG_CORE = [
    "suites/suite/model.py",
    "suites/config/sections.py",
    "suites/suite/overrides.py",
    "suites/config/settings.py",
]


def test_the_config_core_branches_on_no_workload_family_or_engine():
    for rel in CONFIG_CORE:
        found = {line: k for line, k in branches((REPO / rel).read_text()).items() if k != "other"}
        assert not found, f"{rel} branches on a workload/family/engine at lines {found}"


def test_the_census_finds_what_it_counts(tmp_path):
    # A census that found nothing anywhere would pass the test above for the wrong reason.
    src = 'if suite.kind == "rww" or flavor != "mongodb" or engine in ("rocksdb",):\n    pass\n'
    assert branches(src) == {1: "family"}
    assert branches('x = {"iibench": 1}.get(kind)\n') == {1: "workload"}
    assert branches('if a.kind == "preload":\n    pass\n') == {1: "other"}
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "m.py").write_text(src)
    assert census(tmp_path, roots=("suites",)) == {"suites/m.py": {1: "family"}}


@pytest.mark.parametrize("kind", list(REGISTRY))
def test_a_workload_declares_its_sections_options_and_client_field(kind):
    w = REGISTRY[kind]
    assert kind in w.sections  # a suite file names its workload by this section
    settings = {(s, k) for s, k, _, _ in template_settings()}
    for name, model in w.sections.items():
        assert Suite.model_fields[name].annotation is model
        assert {(name, k) for k in model.model_fields} <= settings
    own = {(s, k) for s, m in w.sections.items() for k in m.model_fields}
    for opt, target in w.options.items():
        assert isinstance(target, str) or tuple(target) in own, (opt, target)
    assert w.clients_field[0] in own
    assert w.max_clients(Suite()) > 0
    assert kind in SuiteInfo.model_fields["kind"].description


def test_kinds_and_flavors_come_from_the_registries():
    with pytest.raises(ValueError) as e:
        SuiteInfo.model_validate({"kind": "nope"})
    for kind in REGISTRY:
        assert repr(kind) in str(e.value)
    # [server] is validated by the section of the family its flavor names, and each section
    # takes exactly its family's flavors
    sections = models_of(Suite.model_fields["server"].annotation)
    for family in {id(f): f for f in FAMILIES.values()}.values():
        assert family.section in sections
        assert family.section.model_fields["flavor"].annotation.__args__ == family.flavors
    from suites.suite.model import parse_suite

    with pytest.raises(SuiteError) as e:
        parse_suite('[server]\nflavor = "nope"\n', "x.toml")
    assert str(e.value).startswith("x.toml:2: server.flavor: expected ")
    for flavor in FAMILIES:
        assert repr(flavor) in str(e.value)


def test_an_option_a_workload_does_not_take_names_the_workload():
    from suites.suite.model import parse_suite

    s = parse_suite('[suite]\nkind = "iibench"\n[iibench]\n', "x.toml")
    with pytest.raises(SuiteError, match=r"^--threads applies to sysbench suites; set \[iibench\]"):
        apply_overrides(s, threads=[8])
    assert apply_overrides(s, duration=7).iibench.max_seconds == 7


# A workload that exists only in this test: registered before the Suite model is built (in a
# child interpreter, so that this process keeps the real one), it must get its section, its
# template lines, its kind, its CLI option and its connection-limit check without any edit to
# the config modules.
_NEW_WORKLOAD = textwrap.dedent(
    """
    import json, sys
    from pydantic import Field
    from suites.workloads import registry as workloads
    from suites.config.settings import Section
    from suites.workloads.base import Workload

    class ChurnSection(Section):
        sessions: int = Field(4, ge=1, description="Sessions opened at once.")
        max_seconds: float = Field(10, description="Time cap.")

    class Churn(Workload):
        kind = "sessions"
        summary = "sessions come and go"
        sections = {"sessions": ChurnSection}
        clients_field = (("sessions", "sessions"), "sessions")
        options = {"duration": ("sessions", "max_seconds"), "threads": "set [sessions] sessions"}

        def max_clients(self, suite):
            return suite.sessions.sessions

    workloads.REGISTRY["sessions"] = Churn()

    from suites.suite.model import parse_suite, template_settings
    from suites.suite.overrides import apply_overrides
    from suites.errors import SuiteError

    def error(fn):
        try:
            fn()
        except SuiteError as e:
            return str(e)
        return None

    head = '[suite]\\nkind = "sessions"\\n[sessions]\\n'
    s = parse_suite(head + "sessions = 3\\n", "x.toml")
    print(json.dumps({
        "template": [list(t) for t in template_settings() if t[0] == "sessions"],
        "sessions": s.sessions.sessions,
        "max_threads": s.max_threads,
        "duration": apply_overrides(s, duration=7).sessions.max_seconds,
        "threads": error(lambda: apply_overrides(s, threads=[8])),
        "bad": error(lambda: parse_suite(head + "sessions = 0\\n", "x.toml")),
        "limit": error(lambda: parse_suite(
            head + "sessions = 9\\n[server]\\nsettings = { max_connections = 12 }\\n", "x.toml"
        )),
        "kind": error(lambda: parse_suite('[suite]\\nkind = "x"\\n', "x.toml")),
    }))
    """
)


def test_a_new_workload_is_a_plugin_and_no_config_edit():
    out = subprocess.run(
        [sys.executable, "-c", _NEW_WORKLOAD],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    got = json.loads(out.stdout)
    assert got["template"] == [
        ["sessions", "sessions", 4, "Sessions opened at once."],
        ["sessions", "max_seconds", 10, "Time cap."],
    ]
    assert got["sessions"] == 3 and got["max_threads"] == 3
    assert got["duration"] == 7
    assert got["threads"] == "set [sessions] sessions"
    assert got["bad"] == "x.toml:4: sessions.sessions: expected a value >= 1 (got 0)"
    assert got["limit"].startswith(
        "x.toml:4: sessions.sessions: sessions 9 is above the server's connection limit "
        "(server.settings.max_connections = 12"
    )
    assert "'sessions'" in got["kind"] and "'sysbench'" in got["kind"]


def test_the_console_table_of_an_iibench_run_says_rows_and_batches(tmp_path):
    import csv

    from rich.console import Console

    from rundir.format import RESULTS_COLUMNS
    from suites.cli.commands.run import final_table

    row = {"cell": "c1", "server": "mariadb", "allocator": "glibc", "thp": "system",
           "workload": "iibench", "threads": 10, "status": "ok", "qps": 5000, "lat_p95_ms": 3.0}  # fmt: skip
    cells = [{"id": "c1", "index": 0, "status": "ok"}]
    manifest = {"format_version": 2, "cells": cells, "suite": {"suite": {"kind": "iibench"}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with (tmp_path / "results.csv").open("w") as f:
        w = csv.DictWriter(f, fieldnames=RESULTS_COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerow(row)
    con = Console(record=True, width=200)
    for t in final_table(tmp_path):
        con.print(t)
    text = con.export_text()
    assert "iibench: rows/s / p95 ms per batch" in text and "5,000 / 3.00" in text
