"""The kit's launcher with real mounts, in seconds (no kit is built): a stand-in kit whose root has
the host's loader, mount, umount and chroot but no tool. A killed earlier run's mounts are undone
before anything else, the /proc, /sys and /dev mounts and the binds are made, and everything is
unmounted again when the command in the root fails; the host's own /sys and /dev mounts are
untouched (rslave: nothing propagates back). The full kit: test_kit.py (make test-kit)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

LAUNCHER = Path(__file__).resolve().parents[2] / "suites" / "kit" / "launcher.sh"
HOST = {
    "lib64/ld-linux-x86-64.so.2": "/lib64/ld-linux-x86-64.so.2",
    "usr/bin/mount": "/usr/bin/mount",
    "usr/bin/umount": "/usr/bin/umount",
    "usr/sbin/chroot": "/usr/sbin/chroot",
}


def _mounts_under(d: Path) -> list[str]:
    prefix = str(d) + "/"
    return [
        ln.split()[4]
        for ln in Path("/proc/self/mountinfo").read_text().splitlines()
        if ln.split()[4].startswith(prefix)
    ]


def _host_mounts() -> list[str]:
    return sorted(ln.split()[4] for ln in Path("/proc/self/mountinfo").read_text().splitlines())


@pytest.fixture
def kit():
    if os.geteuid() != 0:
        pytest.skip("the launcher mounts: run the tests as root")
    missing = [h for h in HOST.values() if not Path(h).exists()]
    if missing:
        pytest.skip(f"this host has no {missing[0]}")
    top = Path(tempfile.mkdtemp(prefix="ms-kitl-", dir="/tmp")).resolve()
    k = top / "kit"
    for inside, host in HOST.items():
        (k / "root" / inside).parent.mkdir(parents=True, exist_ok=True)
        (k / "root" / inside).symlink_to(host)
    (k / "root/opt/mallocsweep/suites").mkdir(parents=True)
    (k / "root/opt/mallocsweep/suites/smoke.toml").write_text('[suite]\nname = "smoke"\n')
    shutil.copyfile(LAUNCHER, k / "mallocsweep")
    (k / "mallocsweep").chmod(0o755)
    try:
        yield k
    finally:
        for mp in reversed(_mounts_under(top)):
            subprocess.run(["umount", "-l", mp], check=False)
        if not _mounts_under(top):
            shutil.rmtree(top)


def test_stale_mounts_are_undone_and_a_failed_command_leaves_nothing_mounted(kit):
    host_before = _host_mounts()
    # what a launcher killed with SIGKILL leaves: its mounts and its pid file
    stale = kit / "root/proc"
    stale.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "stale", str(stale)], check=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (kit / ".launcher.pid").write_text(f"{dead.pid}\n")
    data = kit.parent / "data"  # --out outside the directory it is started from
    here = kit.parent / "here"
    data.mkdir()
    here.mkdir()
    p = subprocess.run(
        [str(kit / "mallocsweep"), "run", "smoke", "--out", str(data / "runs")],
        capture_output=True,
        text=True,
        cwd=here,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    # the root holds no /usr/bin/env: chroot cannot start the tool (127) after mounting
    assert p.returncode == 127, p.stderr
    assert f"undoing the mounts a killed earlier run left: {stale}" in p.stderr
    assert _mounts_under(kit) == []
    assert not (kit / ".launcher.pid").exists()
    assert (data / "runs").is_dir()  # --out made on the host, as `run` would, and bound
    assert (kit / "root" / str(data / "runs").lstrip("/")).is_dir()  # its mount point
    assert _host_mounts() == host_before  # /sys and /dev of the host as they were


def test_a_second_start_while_a_tool_runs_in_the_root_is_refused(kit):
    # a process whose root is the kit's: what a tool left by a SIGKILLed launcher looks like
    holder = subprocess.Popen(
        [sys.executable, "-c", "import os, sys, time; os.chroot(sys.argv[1]); time.sleep(60)"]
        + [str(kit / "root")]
    )
    try:
        for _ in range(600):  # until it has entered the root
            if os.readlink(f"/proc/{holder.pid}/root") == str(kit / "root"):
                break
            time.sleep(0.1)
        p = subprocess.run(
            [str(kit / "mallocsweep"), "run", "smoke"],
            capture_output=True,
            text=True,
            cwd=kit.parent,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        assert p.returncode == 2
        assert f"still runs in the kit's root (pid {holder.pid})" in p.stderr
        assert _mounts_under(kit) == []
    finally:
        holder.kill()
        holder.wait()
