"""The fragmentation suite's settings: [fragmentation] (which scenarios, how many cycles) and one
section per scenario. The sbtest tables the dump, session churn and spike read are [dataset]'s;
the warmup is [warmup]'s (both shared with the sysbench sweep)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from suites.config.errors import FieldError, did_you_mean
from suites.config.settings import MAX_THREADS, Section

# The scenarios, in the order a suite that names none runs them, and the report each reproduces.
REPORTS = {
    "dump": "MDEV-30889; mariadb-operator #1808",
    "session_churn": "'Memory_used does not grow but the process does' (MariaDB KB); "
    "Callaghan 2025 (glibc arenas)",
    "table_cache": "table caches far smaller than the schema (many-table reports)",
    "fulltext": "MySQL bug 95065 / Percona PS-5312",
    "spike": "memory not returned after a load peak (jemalloc decay, tcmalloc release)",
}
SCENARIOS = tuple(REPORTS)
# A level of sysbench is at least this long (its --time is whole seconds).
Seconds = Annotated[int, Field(ge=1, le=3600)]
Clients = Annotated[int, Field(ge=1, le=MAX_THREADS)]
# A soak's length: at least a minute (a look needs cycles of every arm), at most 30 days.
SOAK_MIN_S, SOAK_MAX_S = 60.0, 30 * 86_400.0
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def parse_duration(value) -> float:
    """'6h', '30m', '90s', '2d' or plain seconds -> seconds (0: no soak); ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration like 30m, 2h or 6h, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration like 30m, 2h or 6h, got {value!r}")
    t = value.strip().lower()
    if t in ("", "0", "off", "no"):
        return 0.0
    unit = _UNITS.get(t[-1:])
    try:
        return float(t[:-1] if unit else t) * (unit or 1)
    except ValueError:
        raise ValueError(f"expected a duration like 30m, 2h or 6h, got {value!r}") from None


# What -1 means for a thread cache size: as mallocsweep sizes it for the suite's largest level.
SERVER_THREAD_CACHE = -1


class FragmentationSection(Section):
    scenarios: list[str] = Field(
        default_factory=lambda: list(SCENARIOS),
        description="The scenarios, in this order, in one server life: dump (MDEV-30889), "
        "session_churn, table_cache, fulltext (bug 95065), spike (a burst, then idle).",
    )
    cycles: Annotated[int, Field(ge=2, le=1000)] = Field(
        10,
        description="Cycles of each scenario but the spike (its own [spike] cycles): growth per "
        "cycle is measured over the last half of them.",
    )
    cycle_s: Seconds = Field(
        2,
        description="Seconds of load per cycle (session_churn, table_cache, fulltext; the "
        "dump's background load), whole seconds (sysbench's --time).",
    )
    report_interval_s: Seconds = Field(1, description="sysbench interval reports (timeline).")
    soak: Annotated[float, BeforeValidator(parse_duration)] = Field(
        0,
        description="A soak (`run --soak`): run the scenarios' cycles over and over in ONE server "
        'life per arm for this long (e.g. "6h", "30m"; 0: no soak, `cycles` per scenario). '
        "The arms' servers live side by side and take turns in blocks of soak_block passes (a "
        "pass: one cycle of every scenario), so drift hits every arm alike. Cycles are "
        "checkpointed (--resume continues); it stops early once every growth verdict is decided.",
    )
    soak_block: Annotated[int, Field(ge=1, le=1000)] = Field(
        1, description="Passes one arm runs before the next arm's turn in a soak."
    )
    soak_scenarios: Literal["together", "apart"] = Field(
        "together",
        description="A soak of several scenarios: together = every scenario's cycles in turn in "
        "one life per arm (growth judged once per arm: they share the life); apart = each "
        "scenario soaks in lives of its own, one scenario after another, each its share of the "
        "soak's time (what is left, split between the scenarios still to come), with its own "
        "looks: growth judged per scenario and arm.",
    )
    soak_look_s: Annotated[float, Field(ge=10, le=86_400)] = Field(
        600,
        description="Seconds of soak between looks at the growth verdicts (each look spends a "
        "share of the 5%; the soak stops early when all are decided).",
    )

    @field_validator("scenarios")
    @classmethod
    def _scenarios(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("expected at least one scenario")
        for name in v:
            if name not in SCENARIOS:
                raise ValueError(
                    f"unknown scenario {name!r}{did_you_mean(name, SCENARIOS)}; expected some of "
                    f"{', '.join(SCENARIOS)}"
                )
        if len(set(v)) != len(v):
            raise ValueError(f"a scenario is listed twice in {v}")
        return v

    @field_validator("soak")
    @classmethod
    def _soak(cls, v: float) -> float:
        if v != 0 and not SOAK_MIN_S <= v <= SOAK_MAX_S:
            raise ValueError(
                f"a soak of {v:g} s: expected 0 (no soak) or {SOAK_MIN_S:g} s to 30 days "
                '(e.g. "30m", "6h")'
            )
        return v


class DumpSection(Section):
    background_threads: Annotated[int, Field(ge=0, le=MAX_THREADS)] = Field(
        4,
        description="sysbench oltp_read_write clients running while each dump runs (0: the dump "
        "alone).",
    )
    options: list[str] = Field(
        default_factory=lambda: ["--single-transaction", "--quick"],
        description="Options of the dump client (mariadb-dump / mysqldump) besides the "
        "connection, the output file and the tables.",
    )
    timeout_s: Annotated[float, Field(gt=0)] = Field(
        600, description="A dump still running after this long fails its cycle."
    )

    @field_validator("options")
    @classmethod
    def _options(cls, v: list[str]) -> list[str]:
        for o in v:
            if not o.startswith("--") or "\n" in o:
                raise ValueError(f"expected --options, got {o!r}")
            if o.split("=")[0] in ("--result-file", "--socket", "--user", "--host", "--port"):
                raise ValueError(f"{o.split('=')[0]} is set by mallocsweep; remove it")
        return v


class SessionChurnSection(Section):
    threads: Clients = Field(8, description="Client threads, each opening session after session.")
    statements: Annotated[int, Field(ge=0, le=10_000)] = Field(
        8, description="Server-side prepared statements each session prepares and runs."
    )
    rows: Annotated[int, Field(ge=10, le=10_000_000)] = Field(
        2000,
        description="The largest range a sort, GROUP BY or join reads (each picks a size up "
        "to it); at most [dataset] table_size - 1 is used.",
    )
    thread_cache_sizes: list[Annotated[int, Field(ge=SERVER_THREAD_CACHE, le=16384)]] = Field(
        default_factory=lambda: [4, SERVER_THREAD_CACHE],
        description="thread_cache_size of each block of cycles, in order (SET GLOBAL); -1: as "
        "mallocsweep sizes it (>= the clients: threads are kept). Small: server threads exit "
        "after their session. Each block is a workload of its own (session_churn_tc4, "
        "session_churn_tcsized).",
    )

    @field_validator("thread_cache_sizes")
    @classmethod
    def _caches(cls, v: list[int]) -> list[int]:
        if not v or len(set(v)) != len(v):
            raise ValueError("expected one or more different sizes")
        return v


class TableCacheSection(Section):
    tables: Annotated[int, Field(ge=10, le=100_000)] = Field(
        1000, description="Small tables (tc_1..N), prepared once with the dataset."
    )
    rows: Annotated[int, Field(ge=1, le=10_000)] = Field(10, description="Rows per table.")
    threads: Clients = Field(4, description="Client threads reading tables at random.")
    table_open_cache: Annotated[int, Field(ge=10, le=1_000_000)] = Field(
        200, description="table_open_cache during the scenario (SET GLOBAL; put back after)."
    )
    table_definition_cache: Annotated[int, Field(ge=400, le=1_000_000)] = Field(
        400,
        description="table_definition_cache during the scenario (the servers' minimum is 400).",
    )

    @model_validator(mode="after")
    def _beyond(self):
        if self.tables <= max(self.table_open_cache, self.table_definition_cache):
            raise FieldError(
                ("table_cache", "tables"),
                f"{self.tables} tables fit in the caches (table_open_cache "
                f"{self.table_open_cache}, table_definition_cache {self.table_definition_cache}): "
                "nothing would churn; use more tables than either cache holds",
            )
        return self


class FulltextSection(Section):
    docs: Annotated[int, Field(ge=100, le=10_000_000)] = Field(
        20000, description="Documents in the FULLTEXT table (prepared once with the dataset)."
    )
    words: Annotated[int, Field(ge=4, le=10_000)] = Field(40, description="Words per document.")
    vocabulary: Annotated[int, Field(ge=100, le=1_000_000)] = Field(
        5000, description="Distinct words (drawn log-uniformly: a few are in most documents)."
    )
    threads: Clients = Field(4, description="Client threads running fulltext queries.")


class SpikeSection(Section):
    cycles: Annotated[int, Field(ge=1, le=1000)] = Field(
        3, description="Bursts, each followed by its idle time."
    )
    threads: Clients = Field(256, description="Clients of the burst (the largest level).")
    burst_s: Seconds = Field(5, description="Seconds of the burst (sysbench --time).")
    idle_s: Annotated[float, Field(ge=1, le=86_400)] = Field(
        20, description="Seconds of idle after each burst, RSS read every sample_s."
    )
    sample_s: Annotated[float, Field(ge=0.2, le=60)] = Field(
        1, description="RSS readings during the idle time (/proc/PID/status: cheap)."
    )
    workload: str = Field(
        "oltp_ro", description="The burst's sysbench workload: oltp_ro or point_select."
    )

    @field_validator("workload")
    @classmethod
    def _workload(cls, v: str) -> str:
        if v not in ("oltp_ro", "point_select"):
            raise ValueError(f"expected oltp_ro or point_select, got {v!r}")
        return v


SECTIONS = {
    "fragmentation": FragmentationSection,
    "dump": DumpSection,
    "session_churn": SessionChurnSection,
    "table_cache": TableCacheSection,
    "fulltext": FulltextSection,
    "spike": SpikeSection,
}
