"""What a workload plugin declares, and what a cell asks of it.

A workload (a suite's `[suite] kind`) is one module in suites/workloads/ with one subclass of
Workload, registered by its kind in suites/workloads/registry.py. A cell of any server family
(suites/runner/workload_cell.py) asks it for its levels, its clock, its warmup and its database; the
planner, the dataset cache and the preflight ask it for estimates.

It declares its settings: the suite sections it reads (pydantic models on suites.config.settings.Section,
with help and defaults; one is named like its kind, and a suite file names its workload by that
section), which suites/suite/model.py puts into the Suite model and the template; the CLI options that
set its fields; and the rules across sections only it knows (can it run on this server family,
its statements against the server's statement limit). Its levels and warmup get a
suites.workloads.context.LevelContext (connect, run a client, report progress and intervals, read a
server counter by its meaning), never the cell. Its results are a suites.workloads.level_result.LevelResult per
level — the figures every workload has, plus its own typed record (rundir.records: what
rundir.derive and the report read back) — from which rundir.derive derives the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from suites.workloads.level_result import LevelResult

Phase = tuple[str, Callable[[], LevelResult]]  # (phase name, runs the level)


@dataclass
class PreparedData:
    """What prepare_dataset made: the seconds it took, and each of its workloads' tables (the
    warmup scans them; kept in the dataset cache's meta)."""

    seconds: float
    tables: dict[str, list[str]] = field(default_factory=dict)


class Workload:
    kind: str = ""
    summary: str = ""  # what it runs, in a few words: the help of `[suite] kind`
    database: str = "sbtest"  # what its clients use on a MySQL-family server
    # Its suite sections, by name, in the template's order; each is in every Suite (with its
    # defaults), whatever the kind, so a suite file may keep a section it does not run.
    sections: dict[str, type] = {}
    # Where its client count is set and how an error calls it (the connection-limit check).
    clients_field: tuple[tuple[str, str], str] = (("", ""), "")
    # CLI options that set one of its fields ("duration" -> (section, key)), or a string: why the
    # option does not apply to it. Options it does not name set what they set for every kind.
    options: dict[str, tuple[str, str] | str] = {}
    churns = False  # [memory] churn_cycles can cycle its levels (clients come and go)
    # Its levels can run in short blocks on several live servers in turn ([run] design =
    # "alternate", suites/runner/alternate.py): it implements block_levels
    alternates = False
    remote_clients = False  # its levels can run on a client host ([clients] hosts)
    # What runs on a client host: "sysbench", or "python" (our own clients, suites.workloads.pylevel)
    remote_program = "sysbench"
    # Its levels' clients can be split over several client hosts (suites.remote.hosts)
    remote_split = False
    # It reads the server's own account of its memory (server_memory_used_kb) at every
    # boundary: the family switches on what that needs (MySQL: performance_schema)
    server_account = False

    def max_clients(self, suite) -> int:
        """Client connections its largest level opens at once."""
        raise NotImplementedError

    def min_clients(self, suite) -> int:
        """Client connections its smallest level opens (what a split over hosts must cover)."""
        return self.max_clients(suite)

    def check_family(self, suite, family) -> None:
        """A suites.config.errors.FieldError when it cannot run on the suite's server family."""

    def check_server(self, suite, binary) -> None:
        """A SuiteError (one line) when the resolved server `binary` lacks something it needs (a
        client program of the server's own, e.g. its dump client): before any server starts."""

    def check_limits(self, suite, family) -> None:
        """A FieldError when a statement or row of its would exceed what the server takes (checked
        last, after the server and allocator settings, before any server starts)."""

    def phases(self, ctx) -> Iterator[Phase]:
        """(phase name, callable returning the level's LevelResult) per level, in order. `ctx`
        is the cell's suites.workloads.context.LevelContext."""
        raise NotImplementedError

    def block_levels(self, ctx, block_s: int) -> Iterator[tuple[str, Callable]]:
        """For the alternate design: (phase name, run_block) per level, in the order of
        `phases`; run_block(index) runs one block of `block_s` seconds of that level on `ctx`'s
        server and returns its LevelResult (its interval reports through `on_interval`)."""
        raise NotImplementedError

    def compose_blocks(self, results: list[LevelResult]) -> LevelResult:
        """A level's blocks (block_levels' results, in order) as one LevelResult."""
        raise NotImplementedError

    def clock(self, suite) -> tuple[float | None, float | None, bool]:
        """(planned seconds of a level, report interval, whether the last report marks the end of
        the load): how rundir.derive.window.measured_window places each level's window end."""
        raise NotImplementedError

    def warmup(self, ctx) -> dict | None:
        """Run before the first level, once the server answers (`ctx`: a LevelContext); the
        manifest's cells[].warmup."""
        return None

    def prepared_statements(self, suite) -> int:
        """What its largest level's clients hold at once (max_prepared_stmt_count)."""
        return 0

    def estimate_cell_seconds(self, suite) -> float:
        """Its share of one cell's wall time (warmup and levels), for the ETA and budgets."""
        raise NotImplementedError

    def dataset_spec(self, suite) -> dict:
        """What its pristine datadir holds (the dataset cache's key); {"kind": "empty"}: none."""
        return {"kind": "empty"}

    def databases(self, suite) -> list[str]:
        """The databases its dataset's tables live in (created before prepare_dataset)."""
        return [self.database]

    def prepare_dataset(
        self, suite, target, logs, engine: str = "innodb", connect=None
    ) -> PreparedData:
        """Fill a fresh datadir's database (`target`) with its dataset_spec, its tables in
        `engine`. `connect()` opens a server connection (to check what was made). Called once per
        dataset spec, engine and server version (the cache key)."""
        return PreparedData(0.0)

    def console_units(self, name: str) -> tuple[str, str]:
        """(throughput, latency) headings of the console's final table for the recorded workload
        `name` (its qps and lat_p95_ms columns) of a run of this kind."""
        return "QPS", "p95 ms"

    def dataset_kb(self, suite) -> int:
        """Disk its dataset takes beyond a fresh datadir (preflight)."""
        return 0

    def remote_files(self, suite) -> list[str]:
        """Files of the suite's its clients need on a client host (a user's script)."""
        return []
