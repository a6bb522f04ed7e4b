"""A setting as a real arm of the runner: one run of the suite with two allocators, the tuned
allocator's defaults (the baseline) and the same build with the setting, paired round by round.

Nothing here measures or proves anything itself: the runner starts each life through the usual
launch path, and servers/verify.py proves the allocator (its binding) and that the live process
has the setting (its /proc/PID/environ holds every variable and tunable of the arm) before a cell
is measured. A cell whose proof fails is failed, never measured.
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

from servers.allocators import Allocator
from servers.errors import ServerError
from suites.errors import SuiteError
from suites.runner.display import Display
from suites.runner.matrix import Matrix
from suites.runner.plan import estimate_cell_seconds
from suites.suite.model import LoadedSuite, Suite, suite_from_dict


def arm_suite(suite: Suite, allocator: str, rounds: int, out: Path) -> Suite:
    """The suite as a trial runs it: only `allocator` (its defaults are the baseline, the
    setting is added as a second arm), a fixed number of rounds (no budget of its own: the tune
    has one), no A/A arm (the defaults' lives are the comparison), run directories under `out`."""
    data = suite.as_dict()
    data["allocators"]["use"] = [allocator]
    data["allocators"]["custom"] = []
    data["run"].update(baseline=allocator, repeat=rounds, budget_s=0, aa=False, out=str(out))
    return suite_from_dict(data, f"tune of {allocator}")


def named_scenarios(loaded: LoadedSuite) -> list[str]:
    """The fragmentation scenarios a tune suite names for a growth run: the scenarios of a
    [fragmentation] table written in the suite file ([] without one: the model gives every suite
    that table with its defaults, so only the file says whether it was asked for; [] for a
    fragmentation suite, whose own run has its growth)."""
    if loaded.suite.suite.kind == "fragmentation":
        return []  # its own run is the growth run (objectives.figures reads it there)
    try:
        table = tomllib.loads(Path(loaded.path).read_text()).get("fragmentation")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []  # a suite recorded in a tune before growth runs existed
    if not isinstance(table, dict):
        return []
    return list(loaded.suite.fragmentation.scenarios)


def growth_suite(suite: Suite, scenarios: list[str]) -> Suite:
    """The suite's growth run: its server, dataset and warmup, its [fragmentation] cycles and the
    named scenarios, in solo lives (a scenario's cycles are read along one life: its RSS at each
    cycle's end; alternating blocks are for throughput levels)."""
    data = suite.as_dict()
    data["suite"]["kind"] = "fragmentation"
    data["suite"]["name"] = f"{data['suite']['name']}-growth"
    data["fragmentation"]["scenarios"] = list(scenarios)
    for key in ("design", "block_s", "blocks", "block_settle_cap_s"):
        data["run"].pop(key, None)
    return suite_from_dict(data, "the tune's growth run")


def trial_seconds(suite: Suite, rounds: int, growth: Suite | None = None) -> float:
    """What one trial (two arms x rounds, of the suite and of its growth run) is expected to
    take: the runner's own estimate."""
    cell = estimate_cell_seconds(suite) + (estimate_cell_seconds(growth) if growth else 0.0)
    return cell * 2 * rounds


def with_setting(default: Allocator, name: str, env: dict, tunables: tuple, what: str) -> Allocator:
    """`default` with the setting: the same library and build, its env and tunables added (a
    GLIBC_TUNABLES item is appended after the registry's own, Allocator.launch_env)."""
    return replace(
        default,
        name=name,
        env={**default.env, **env},
        tunables=(*default.tunables, *tunables),
        description=f"{default.name} with {what}",
        core=False,
        base=default.name,
        source="mallocsweep tune",
    )


class ArmMatrix(Matrix):
    """The runner's matrix with the setting's arm beside the allocator's defaults."""

    def __init__(self, *args, arm_name: str, env: dict, tunables: tuple, what: str, **kw):
        super().__init__(*args, **kw)
        self._arm = (arm_name, dict(env), tuple(tunables), what)

    def resolve_allocators(self, binary=None, server=None) -> list:
        allocs = super().resolve_allocators(binary, server)
        name, env, tunables, what = self._arm
        return [*allocs, with_setting(allocs[0], name, env, tunables, what)]


def run_arm(
    loaded: LoadedSuite,
    suite: Suite,
    arm_name: str,
    env: dict,
    tunables: tuple,
    what: str,
    display: Display,
) -> tuple[int, Path | None]:
    """Run the defaults and the setting, paired; (exit code as `run`'s, run directory)."""
    m = ArmMatrix(loaded, suite, display=display, arm_name=arm_name, env=env, tunables=tunables,
                  what=what)  # fmt: skip
    try:
        code = m.run()
    except ServerError as e:
        raise SuiteError(str(e)) from None
    cells = m.manifest.get("cells", [])
    if any(c.get("status") != "ok" or c.get("level_failures") for c in cells):
        code = 3
    return code, m.run_dir.path if m.run_dir else None
