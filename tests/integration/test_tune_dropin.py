"""The drop-in a tune writes, installed as a DBA would, reaches the server: its environment, read
back from the file, started through the runner's own launch path (one life of the smoke suite),
and proven in the live process: the binding and /proc/PID/environ by the runner's verification,
jemalloc's opt.* by the allocator itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from servers.allocators import resolve
from servers.verify import tunables_in
from suites.runner.display import Display
from suites.suite.model import load_suite
from suites.tune import dropin, proof
from suites.tune.arms import arm_suite, run_arm
from suites.tune.space import space_of

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "suites" / "smoke.toml"


@pytest.mark.parametrize(
    "allocator, setting",
    [
        ("jemalloc", {"narenas": 2, "dirty_decay_ms": 1000, "background_thread": "true"}),
        ("glibc", {"arena_max": 2, "tcache_count": 0}),
    ],
)
def test_the_dropins_environment_is_proven_in_the_server(out, allocator, setting):
    (defaults,) = resolve([allocator])
    if not defaults.usable:
        pytest.skip(f"{allocator}: {defaults.why_not}")
    space = space_of(allocator)
    env, tunables = space.env_of(setting)
    path = out / dropin.DROPIN
    path.write_text(dropin.dropin_text(defaults, env, tunables, ["test"]))
    variables = dropin.environment(path)
    assert dropin.setting_of(defaults, variables) == (env, tunables)

    loaded = load_suite(SMOKE)
    arm = f"{allocator}-dropin"
    suite = arm_suite(loaded.suite, allocator, 1, out / "runs")
    code, run_dir = run_arm(
        loaded, suite, arm, *dropin.setting_of(defaults, variables), "the drop-in", Display(False)
    )
    assert code == 0
    texts = {k: space.knobs[k].text(v) for k, v in setting.items()}
    (cell,) = proof.read_back(run_dir, arm, space.writes, texts)["cells"]
    if allocator == "jemalloc":
        assert cell["environ"]["MALLOC_CONF"] == variables["MALLOC_CONF"]
        assert cell["allocator"] == texts  # what jemalloc itself says it runs with
    else:
        assert "LD_PRELOAD" not in variables
        assert set(variables["GLIBC_TUNABLES"].split(":")) <= tunables_in(cell["environ"])
