"""The kit end to end (issue 37): build a kit with the host's MariaDB, unpack it on a bare Debian
root (debootstrap minbase: no python3, no mariadb, no sysbench), run the smoke suite there under
chroot in a network namespace with only loopback, and check the rows of both allocators, that
nothing is left running or mounted, and that the system's THP and huge-page settings are as
before. The run directory then reports and compares with the host's mallocsweep.

Long (a kit build is minutes of apt, pip and compression; a run on the bare target): `make
test-kit` runs it (MALLOCSWEEP_TEST_KIT=1); make test skips it. MALLOCSWEEP_TEST_KIT_ARCHIVE=FILE
uses an archive already built instead of building one (a .tar.gz: the bare target has no zstd).

The bare target plays the host: it gets /proc, /sys and /dev as any host has them, in a private
mount namespace of the test (`unshare --mount --net`) that dies with it; the launcher's own
mounts are inside that namespace, and what it left is read there (mountinfo after the run).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from servers.acquire import archive, minbase
from tests.integration.roots import CACHE

pytestmark = [
    pytest.mark.integration,
    pytest.mark.system_settings,  # it checks THP and huge pages are as before the run
    pytest.mark.timeout(3600),
    pytest.mark.skipif(
        not os.environ.get("MALLOCSWEEP_TEST_KIT"),
        reason="long (a kit build and a run on a bare root): `make test-kit` runs it",
    ),
]

REPO = Path(__file__).resolve().parents[2]
TOOL = Path(sys.executable).with_name("mallocsweep")
KNOBS = (
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/kernel/mm/transparent_hugepage/defrag",
    "/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none",
    "/proc/sys/vm/nr_hugepages",
)
INSIDE = """#!/bin/sh
# Run inside the bare target (its own /bin/sh): unpack, doctor, the smoke suite, what is left.
cd /work || exit 90
cat /proc/net/dev > netdev.txt
t0=$(date +%s.%N)
tar xf kit.tar.gz || exit 91
t1=$(date +%s.%N)
./{d}/mallocsweep doctor > doctor.txt 2>&1; echo $? > doctor.rc
t2=$(date +%s.%N)
./{d}/mallocsweep run smoke --out runs --quiet > run.log 2>&1; echo $? > run.rc
t3=$(date +%s.%N)
cat /proc/self/mountinfo > mountinfo.after
# SIGTERM to the launcher while a server of the run lives: passed on, servers stopped, unmounted
./{d}/mallocsweep run smoke --out runs-term --quiet > term.log 2>&1 &
lp=$!
ours() {{  # a mariadbd in the kit's root (the machine runs other servers too)
  for p in /proc/[0-9]*; do
    [ "$(cat $p/comm 2>/dev/null)" = mariadbd ] && [ "$(readlink $p/root)" = /work/{d}/root ] && return 0
  done
  return 1
}}
i=0
while [ $i -lt 900 ] && kill -0 $lp 2>/dev/null && ! ours; do sleep 1; i=$((i+1)); done
kill -TERM $lp; wait $lp; echo $? > term.rc
cat /proc/self/mountinfo > mountinfo.term
echo "unpack $t0 $t1" > times.txt; echo "doctor $t1 $t2" >> times.txt; echo "run $t2 $t3" >> times.txt
"""


def _settings() -> dict[str, str]:
    out = {}
    for k in KNOBS:
        try:
            out[k] = Path(k).read_text().strip()
        except OSError:
            out[k] = "unreadable"
    return out


def _processes_in(top: Path) -> list[str]:
    """Processes whose root or executable is under `top` (the bare target and the kit in it)."""
    found = []
    prefix = str(top.resolve())
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        for link in ("root", "exe"):
            try:
                target = os.readlink(p / link)
            except OSError:
                continue
            if target.startswith(prefix):
                try:
                    cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
                except OSError:
                    cmd = "?"
                found.append(f"{p.name} {cmd}")
                break
    return found


@pytest.fixture(scope="module")
def work():
    if os.geteuid() != 0:
        pytest.skip("a kit builds and runs as root (debootstrap, chroot, mounts)")
    for tool in ("debootstrap", "unshare", "ip", "tar"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    os.environ.setdefault("MALLOCSWEEP_SERVERS", str(CACHE))  # the minbase root is cached there
    d = Path(tempfile.mkdtemp(prefix="ms-kit-", dir="/tmp"))
    try:
        yield d
    finally:
        leftover = [
            ln for ln in Path("/proc/self/mountinfo").read_text().splitlines() if str(d) in ln
        ]
        if not leftover:  # never rmtree across a mount
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def kit_archive(work):
    given = os.environ.get("MALLOCSWEEP_TEST_KIT_ARCHIVE")
    if given:
        return Path(given), 0.0
    out = work / "mallocsweep-kit.tar.gz"
    t0 = time.monotonic()
    p = subprocess.run(
        [str(TOOL), "kit", "build", "--out", str(out), "--server", "host"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=3000,
    )
    seconds = time.monotonic() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    print(f"\nkit build: {seconds:.0f} s, {out.stat().st_size / 1e6:.0f} MB ({os.getloadavg()})")
    return out, seconds


@pytest.fixture(scope="module")
def bare_run(work, kit_archive):
    archive_path, _ = kit_archive
    release = archive.host_release()
    bare = minbase.copy_root(release, work / "bare")
    for absent in ("usr/bin/python3", "usr/sbin/mariadbd", "usr/bin/sysbench", "usr/bin/apt-get"):
        if absent == "usr/bin/apt-get":  # minbase has apt; the target must not need it
            (bare / absent).unlink()
            continue
        assert not (bare / absent).exists(), f"the bare target has {absent}"
    (bare / "work").mkdir()
    shutil.copyfile(archive_path, bare / "work/kit.tar.gz")
    dirname = "mallocsweep-kit"
    if archive_path.name != "mallocsweep-kit.tar.gz":
        dirname = archive_path.name.removesuffix(".tar.gz")
    (bare / "work/go.sh").write_text(INSIDE.format(d=dirname))
    before = _settings()
    host_side = (
        "set -e; ip link set lo up; "
        f"mount -t proc proc {bare}/proc; "
        f"mount --rbind /sys {bare}/sys; mount --make-rslave {bare}/sys; "
        f"mount --rbind /dev {bare}/dev; mount --make-rslave {bare}/dev; "
        f"exec chroot {bare} /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "
        "/bin/sh /work/go.sh"
    )
    t0 = time.monotonic()
    p = subprocess.run(
        ["unshare", "--net", "--mount", "--propagation", "private", "sh", "-c", host_side],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=3000,
    )
    seconds = time.monotonic() - t0
    w = bare / "work"
    print(
        f"\non the bare target: {seconds:.0f} s in all; "
        + "; ".join(
            f"{ln.split()[0]} {float(ln.split()[2]) - float(ln.split()[1]):.0f} s"
            for ln in (w / "times.txt").read_text().splitlines()
        )
        + f" (load {os.getloadavg()})"
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return {
        "bare": bare,
        "work": w,
        "kit": w / dirname,
        "before": before,
        "after": _settings(),
    }


def test_the_bare_target_has_only_loopback(bare_run):
    lines = (bare_run["work"] / "netdev.txt").read_text().splitlines()[2:]
    assert [ln.split(":")[0].strip() for ln in lines] == ["lo"]


def test_doctor_names_nothing_lacking_on_this_host(bare_run):
    text = (bare_run["work"] / "doctor.txt").read_text()
    assert "host checks (the kit's launcher):\n  nothing lacking" in text, text
    assert "the tool's checks (inside the kit's root):" in text


def _why(log: Path, runs: Path) -> str:
    """The run's own words when it failed: its log's end and its summary's Failures section (a
    cell's failure is said there, not in the log)."""
    text = log.read_text()[-2000:]
    for summary in runs.glob("*/summary.md"):
        body = summary.read_text()
        if "## Failures" in body:
            text += "\n" + body.split("## Failures", 1)[1].split("\n## ", 1)[0][:2000]
    return text


def test_smoke_suite_ran_with_two_allocators(bare_run):
    w = bare_run["work"]
    rc = (w / "run.rc").read_text().strip()
    assert rc == "0", _why(w / "run.log", w / "runs")
    runs = list((w / "runs").iterdir())
    assert len(runs) == 1
    with open(runs[0] / "results.csv") as f:
        rows = list(csv.DictReader(f))
    allocs = {r["allocator"] for r in rows}
    assert {"glibc", "jemalloc"} <= allocs, allocs
    assert all(float(r["tps"]) > 0 for r in rows)
    man = json.loads((runs[0] / "manifest.json").read_text())
    assert man["status"] == "finished"
    kit = json.loads((bare_run["kit"] / "kit.json").read_text())
    assert man["kit"] == kit  # the kit's manifest, recorded in the run
    kinds = {c["kind"] for c in kit["components"]}
    assert {"tool", "allocator", "sysbench", "server", "helper", "shim"} <= kinds
    jemalloc = next(c for c in kit["components"] if c["name"] == "jemalloc")
    recorded = next(a for a in man["allocators"] if a["name"] == "jemalloc")
    assert recorded["sha256"] == jemalloc["sha256"]  # the library measured is the kit's


def test_nothing_left_running_or_mounted_and_settings_restored(bare_run):
    kit_root = str(bare_run["kit"].resolve()).removeprefix(str(bare_run["bare"].resolve()))
    after = (bare_run["work"] / "mountinfo.after").read_text().splitlines()
    assert [ln for ln in after if f"{kit_root}/root" in ln.split()[4]] == []
    assert not (bare_run["kit"] / ".launcher.pid").exists()
    assert _processes_in(bare_run["bare"]) == []
    assert bare_run["after"] == bare_run["before"]
    # the run directory was written outside the kit: the bound directory inside is empty
    inside = bare_run["kit"] / "root" / "work"
    assert not inside.exists() or list(inside.iterdir()) == []


def test_sigterm_to_the_launcher_stops_the_run_and_unmounts(bare_run):
    w = bare_run["work"]
    assert (w / "term.rc").read_text().strip() == "143", _why(w / "term.log", w / "runs-term")
    kit_root = str(bare_run["kit"].resolve()).removeprefix(str(bare_run["bare"].resolve()))
    left = (w / "mountinfo.term").read_text().splitlines()
    assert [ln for ln in left if f"{kit_root}/root" in ln.split()[4]] == []
    man = json.loads(next((w / "runs-term").iterdir()).joinpath("manifest.json").read_text())
    assert man["status"] == "interrupted" and man["interrupted_by"] == "SIGTERM"


def test_a_kit_run_reports_and_compares_with_the_hosts_tool(bare_run):
    run = next((bare_run["work"] / "runs").iterdir())
    p = subprocess.run([str(TOOL), "report", str(run)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert (run / "report.html").is_file()
    # against a smoke run recorded natively on another day (a format-3 fixture, one round: the
    # statistics may judge nothing, exit 2 with no error line); read, compared and written
    native = REPO / "tests/fixtures/runs/real-smoke-format3"
    p = subprocess.run(
        [str(TOOL), "compare", str(native), str(run)], capture_output=True, text=True, timeout=600
    )
    assert p.returncode in (0, 1, 2) and p.stderr == "", p.stderr
    assert "jemalloc" in p.stdout
    assert list(run.glob("compare-*-vs-*.html")) and list(run.glob("compare-*-vs-*.md"))
