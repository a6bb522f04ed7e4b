"""A server's recorded warnings (MongoDB's THP advice...) reach the user as the server starts,
through the display's note, and stay in the cell's record."""

from __future__ import annotations

import io
import subprocess
from types import SimpleNamespace as NS

from rich.console import Console

from rundir.write import RunDir
from suites.runner.cell import CellContext, CellRunner
from suites.runner.display import Display
from suites.runner.plan import CellPlan

WARNING = (
    "MongoDB 7.0.2 advises disabling transparent hugepages, but this server runs with THP 'always'"
)


class FakeServer:
    """A real process (so the collectors attach to something) that records a warning."""

    def __init__(self, seen):
        self.seen, self.proc, self.evidence = seen, None, {"verdict": "test"}

    def start(self, on_spawn, timeout_s, before_reap=None):
        self.proc = subprocess.Popen(["sleep", "30"])
        on_spawn(self.proc.pid)
        self.seen.append("started")
        return self.proc.pid

    def to_manifest(self):
        return {"flavor": "mongodb", "warnings": [WARNING]}

    @property
    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s=30):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        return None


class Cell(CellRunner):
    def __init__(self, ctx, seen):
        super().__init__(ctx)
        self.seen = seen

    def make_server(self, thp_disable):
        return FakeServer(self.seen)

    def prepare_datadir(self):
        return {"method": "empty"}

    def warmup(self):
        self.seen.append("warmup")
        return None

    def workload_phases(self):
        return iter(())


def test_server_warnings_are_noted_right_after_the_server_starts(tmp_path):
    seen: list[str] = []
    out = io.StringIO()
    display = Display(enabled=True, console=Console(file=out, width=300))

    def note(text):
        seen.append(text)
        display.note(text)

    plan = CellPlan(index=0, round=1, server_label="mongod", allocator="builtin", thp="system")
    run_dir = RunDir.create(tmp_path, "run")
    applied = NS(thp_disable=False, to_manifest=lambda: {"requested": "system"})
    suite = NS(
        collect=NS(sample_interval_s=0.2, smaps_interval_s=0, perf=False),
        server=NS(startup_timeout_s=5),
        memory=NS(idle_s=0.0, parts=False),
    )
    ctx = CellContext(
        suite=suite,
        plan=plan,
        run_dir=run_dir,
        server_binary=NS(flavor="mongodb", version="7.0.2"),
        allocator=NS(name="builtin", version=None, to_manifest=lambda: {"name": "builtin"}),
        thp=NS(apply=lambda mode: applied),
        dataset=None,
        on_note=note,
    )
    outcome = Cell(ctx, seen).run()
    assert seen == ["started", f"{plan.id}: warning: {WARNING}", "warmup"]
    assert outcome.record["server"]["warnings"] == [WARNING]
    assert (
        f"{plan.id}: warning: {WARNING}" in out.getvalue()
    )  # the quote marks and brackets kept as text


def test_note_prints_brackets_as_text():
    out = io.StringIO()
    Display(enabled=True, console=Console(file=out, width=200)).note("[mongod] [/dim] x")
    assert out.getvalue().strip() == "[mongod] [/dim] x"
