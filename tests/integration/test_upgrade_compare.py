"""An upgrade check on a real version pair (issue 12): the newest older MariaDB patch of the host's
Debian release, fetched as a basedir, against the host's own MariaDB, with repeats on both sides,
then `compare`: points matched by allocator, verdicts with intervals, and what differs besides the
server version said plainly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servers.acquire import fetch
from suites.families.mysql.server import find_mysql
from tests.integration.roots import CACHE
from tests.integration.runs_helpers import (
    kill_quietly,
    mallocsweep,
    manifest,
    small_suite,
    start_run,
)

pytestmark = pytest.mark.integration

SUITE = small_suite(
    "upgrade",
    "one short POINT_SELECT level, repeated, for an upgrade check",
    warmup={"cap_s": 3, "threads": 2},
    run={"repeat": 2},
)


def _run(suite: Path, out: Path, cache: Path, *extra: str) -> Path:
    runs = out / "runs"
    before = set(runs.iterdir()) if runs.exists() else set()
    proc = start_run([str(suite), "--out", str(runs), *extra], cache)
    try:
        _, err = proc.communicate(timeout=900)
    finally:
        kill_quietly(proc)
    assert proc.returncode == 0, err
    (run_dir,) = set(runs.iterdir()) - before
    return run_dir


def test_patch_upgrade_compare_on_real_versions(out, monkeypatch, older_mariadb, dataset_cache):
    monkeypatch.setenv("MALLOCSWEEP_SERVERS", str(CACHE))
    spec = older_mariadb  # e.g. mariadb-10.11.18 while the host runs 10.11.19
    old = fetch.fetch(spec)
    host = find_mysql()
    suite = out / "suite.toml"
    suite.write_text(SUITE)
    base = _run(suite, out, dataset_cache, "--server", f"fetched:{spec}")
    new = _run(suite, out, dataset_cache)
    for run_dir, version in ((base, old.version), (new, host.version)):
        cells = manifest(run_dir)["cells"]
        assert len(cells) == 2 and all(c["status"] == "ok" for c in cells), cells
        assert {c["server"]["version"] for c in cells} == {version}
    done = mallocsweep(
        ["compare", str(base), str(new), "--json", "--out", str(out / "cmp")], timeout=300
    )
    assert done.returncode in (0, 1), done.stderr  # a verdict either way; 2 would be no judgement
    verdicts = json.loads(done.stdout)
    assert verdicts["mode"] == "upgrade"
    (point,) = [p for p in verdicts["points"] if p["workload"] == "point_select"]
    assert point["allocator"] == "glibc" and point["threads"] == 4
    assert point["base_server"] == f"mariadb-{old.version}"
    assert point["new_server"] == f"mariadb-{host.version}"
    assert point["evidence"] == "repeats 2+2" and point["lo"] <= point["ratio"] <= point["hi"]
    assert point["verdict"] in ("faster", "slower", "no significant change")
    warnings = "\n".join(verdicts["warnings"])
    assert f"upgrade check: mariadb-{old.version} -> mariadb-{host.version}" in warnings
    assert "server build differs" in warnings  # what else changed, said plainly
    assert (done.returncode == 1) == any(p["regression"] for p in verdicts["points"])
