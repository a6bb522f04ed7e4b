"""A matrix spread over a fleet: the Ansible playbook runs two shards on two stand-in hosts (network
namespaces with their own sshd, tests/integration/netns.py), fetches them and merges them; report
and compare read the merged run (issue 18, items 2 and 3).

The hosts see this machine's files, so the test gives each its own dataset cache and checks that
what the controller merged came over Ansible's fetch (the shards' work directories are gone from
the hosts, yet the merged run holds every cell).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.integration.netns import NetnsHost, make_hosts, sshd_available
from tests.integration.runs_helpers import REPO, mallocsweep, results, small_suite, wait_for

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
PLAYBOOK = REPO / "deploy/ansible/fleet.yml"
SUITE = small_suite("fleet-smoke", allocators={"use": ["glibc", "jemalloc"]}, run={"repeat": 2})


def _why_not() -> str | None:
    why = sshd_available()
    if why:
        return why
    if not (BIN / "ansible-playbook").exists():
        return "ansible-core is not installed in this venv (make setup installs it)"
    return None


def _mallocsweep(*args: str) -> subprocess.CompletedProcess:
    return mallocsweep(list(args), timeout=300)


@pytest.fixture(scope="module")
def fleet():
    why = _why_not()
    if why:
        pytest.skip(f"no stand-in fleet: {why}")
    tmp = Path(tempfile.mkdtemp(prefix="ms-fleet-"))
    hosts = make_hosts(2)
    try:
        ssh_config = NetnsHost.write_ssh_config(tmp / "ssh_config", hosts)
        (tmp / "suite.toml").write_text(SUITE)
        lines = ["[fleet]"]
        for h in hosts:
            env = {
                "MALLOCSWEEP_CACHE": str(tmp / f"cache-{h.alias}"),
                "MALLOCSWEEP_SERVERS": os.environ.get("MALLOCSWEEP_SERVERS", ""),
            }
            lines.append(f"{h.alias} mallocsweep_env='{json.dumps(env)}'")
        lines += [
            "[fleet:vars]",
            f"ansible_ssh_common_args='-F {ssh_config}'",
            "ansible_python_interpreter=/usr/bin/python3",
            f"mallocsweep_bin={BIN / 'mallocsweep'}",
        ]
        (tmp / "inventory.ini").write_text("\n".join(lines) + "\n")
        (tmp / "ansible.cfg").write_text("[defaults]\n")
        env = dict(
            os.environ,
            ANSIBLE_CONFIG=str(tmp / "ansible.cfg"),  # no /etc/ansible or ~/.ansible.cfg
            ANSIBLE_HOME=str(tmp / "ansible-home"),
            ANSIBLE_LOCAL_TEMP=str(tmp / "ansible-local"),
            ANSIBLE_REMOTE_TMP="/tmp/ms-fleet-ansible-remote",
            ANSIBLE_SSH_CONTROL_PATH_DIR=str(tmp / "cp"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_RETRY_FILES_ENABLED="0",
            PATH=f"{BIN}:{os.environ['PATH']}",
        )
        r = subprocess.run(
            [BIN / "ansible-playbook", "-i", tmp / "inventory.ini", PLAYBOOK,
             "-e", f"suite={tmp / 'suite.toml'}", "-e", f"fetch_dir={tmp / 'fleet-runs'}",
             "-e", f"controller_mallocsweep={BIN / 'mallocsweep'}"],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        yield hosts, tmp, r
    finally:
        for h in hosts:
            h.remove()
        shutil.rmtree("/tmp/ms-fleet-ansible-remote", ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
        left = [x for h in hosts for x in h.leftovers()]
        assert not left, f"the test left behind: {left}"


def _shards(tmp: Path) -> list[Path]:
    out = []
    for alias in ("msclient1", "msclient2"):
        out += [d for d in (tmp / "fleet-runs/shards" / alias).iterdir() if d.is_dir()]
    return out


def test_playbook_runs_two_shards_and_merges_them(fleet):
    hosts, tmp, r = fleet
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    shards = _shards(tmp)
    assert len(shards) == 2
    specs = sorted(json.loads((s / "manifest.json").read_text())["shard"]["index"] for s in shards)
    assert specs == [1, 2]
    merged = tmp / "fleet-runs/merged"
    m = json.loads((merged / "manifest.json").read_text())
    assert m["status"] == "finished" and m["merged"]["count"] == 2
    assert [s["rounds"] for s in m["merged"]["shards"]] == [[1], [2]]
    # Every cell of the whole plan, in the plan's order, each from the shard that ran its round.
    assert [c["index"] for c in m["cells"]] == [0, 1, 2, 3]
    assert [c["round"] for c in m["cells"]] == [1, 1, 2, 2]
    rows = results(merged)
    assert {(r["allocator"], int(r["repeat"])) for r in rows} == {
        (a, n) for a in ("glibc", "jemalloc") for n in (1, 2)
    }
    assert all(r["status"] == "ok" and float(r["qps"]) > 0 for r in rows)
    for c in m["cells"]:
        assert (merged / "cells" / f"{c['id']}.json").is_file()
        assert (merged / "samples" / f"{c['id']}.csv").is_file()
    # The playbook's last step: the merged run's report.
    assert (merged / "report.html").stat().st_size > 0
    assert "fleet-smoke" in (merged / "summary.md").read_text()


def test_nothing_is_left_on_the_fleet_hosts(fleet):
    hosts, tmp, _ = fleet
    for h in hosts:
        r = subprocess.run(
            ["ssh", "-F", str(tmp / "ssh_config"), "-o", "BatchMode=yes", h.alias,
             "ls -d /tmp/mallocsweep-shard-* 2>/dev/null || true"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr
        # No server, no sysbench left in the namespace. The ssh session just above may still be
        # exiting on the host's side: a process that is gone by the time it is read is not left,
        # and a closing session is given a few seconds to go.
        try:
            wait_for(
                lambda h=h: _live_comms(h.pids()) <= {"sshd"}, 10, "only sshd in the namespace"
            )
        except AssertionError:
            pytest.fail(f"left in {h.alias}'s namespace: {sorted(_live_comms(h.pids()))}")


def _live_comms(pids: list[int]) -> set[str]:
    names = set()
    for p in pids:
        try:
            names.add(Path(f"/proc/{p}/comm").read_text().strip())
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited between the listing and the read
    return names


def test_report_and_compare_read_the_merged_run(fleet):
    _, tmp, _ = fleet
    merged = tmp / "fleet-runs/merged"
    r = _mallocsweep("report", str(merged))
    assert r.returncode == 0, r.stderr
    # compare reads the merged run (its integrity check passes) and refuses to compare it with a
    # copy of itself, or with a shard whose cells it holds: one run twice, no verdict, no file.
    copy = tmp / "merged-again"
    shutil.copytree(merged, copy)
    for other, said in ((copy, "same run"), (_shards(tmp)[0], "same server life")):
        r = _mallocsweep("compare", str(merged), str(other), "--out", str(tmp / "cmp"), "--json")
        assert r.returncode == 2 and r.stdout == "", r.stdout[-2000:] + r.stderr
        assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp / "cmp").exists()


def test_merge_refuses_what_is_not_one_matrix(fleet):
    _, tmp, _ = fleet
    one, two = sorted(
        _shards(tmp), key=lambda s: json.loads((s / "manifest.json").read_text())["shard"]["index"]
    )
    out = tmp / "refused"

    def refused(*runs) -> str:
        r = _mallocsweep("merge", *map(str, runs), "--out", str(out))
        assert r.returncode == 2, r.stdout + r.stderr
        assert not out.exists()
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        return lines[0]

    assert "merged with itself" in refused(one, one)
    same = tmp / "same-run-copied"
    shutil.copytree(one, same)
    assert "merged with itself" in refused(one, same)
    other = tmp / "other-suite"
    shutil.copytree(two, other)
    m = json.loads((other / "manifest.json").read_text())
    m["suite"]["sysbench"]["duration_s"] = 5
    (other / "manifest.json").write_text(json.dumps(m))
    line = refused(one, other)
    assert "is from a different suite" in line and "sysbench.duration_s" in line
    # A merged run is not a shard: merging it again with one of its shards is refused.
    assert "not a shard" in refused(one, tmp / "fleet-runs/merged")
