"""The THP probe under system `never` on a fake sysfs: it sets madvise for itself, restores never."""

from __future__ import annotations

import pytest

from collectors import thp_probe


@pytest.fixture
def fake_sysfs(tmp_path):
    d = tmp_path / "thp"
    d.mkdir()
    (d / "enabled").write_text("always madvise [never]\n")
    return d


def test_probe_forces_madvise_and_puts_never_back(fake_sysfs, monkeypatch):
    seen = []
    monkeypatch.setattr(
        thp_probe,
        "_measure",
        lambda: seen.append((fake_sysfs / "enabled").read_text()) or (4096, 0),
    )
    got = thp_probe.prctl_blocks_madvise(fake_sysfs)
    assert seen == ["madvise"]  # the children ran under madvise
    assert (fake_sysfs / "enabled").read_text() == "never"
    assert got["forced"] and got["probe_mode"] == "madvise" and got["system_enabled"] == "never"
    assert got["blocks_madvise"] is True and "restore_error" not in got


def test_probe_leaves_a_system_that_is_on_alone(fake_sysfs, monkeypatch):
    (fake_sysfs / "enabled").write_text("always [madvise] never\n")
    monkeypatch.setattr(thp_probe, "_measure", lambda: (4096, 4096))
    got = thp_probe.prctl_blocks_madvise(fake_sysfs)
    assert not got["forced"] and got["probe_mode"] == "madvise"
    assert got["blocks_madvise"] is False
    assert (fake_sysfs / "enabled").read_text() == "always [madvise] never\n"


def test_probe_says_when_never_could_not_be_put_back(fake_sysfs, monkeypatch, capsys):
    def measure():
        (fake_sysfs / "enabled").unlink()
        (fake_sysfs / "enabled").mkdir()  # writing it back now fails
        return 4096, 0

    monkeypatch.setattr(thp_probe, "_measure", measure)
    got = thp_probe.prctl_blocks_madvise(fake_sysfs)
    assert "writing 'never' back failed" in got["restore_error"]
    assert "THP NOT RESTORED" in capsys.readouterr().err


def test_probe_does_not_force_while_another_run_holds_the_system(fake_sysfs, tmp_path, monkeypatch):
    """Another run of ours has its cell under `never` (it holds the machine lock): forcing
    madvise now would measure that cell under the wrong mode and, writing `never` back after
    that run restored its original, leave the machine at `never`. So the probe does not force."""
    import fcntl
    import os

    from collectors import thp_sysfs

    lock = thp_sysfs.MachineLock(tmp_path / "system.lock")
    monkeypatch.setattr(thp_probe, "MACHINE_LOCK", lock)
    monkeypatch.setattr(thp_probe, "SYSFS", fake_sysfs)  # the probe takes it for the machine's
    monkeypatch.setattr(thp_probe, "_measure", lambda: (4096, 0))
    other = os.open(tmp_path / "system.lock", os.O_RDWR | os.O_CREAT)  # another process's flock
    try:
        fcntl.flock(other, fcntl.LOCK_EX)
        got = thp_probe.prctl_blocks_madvise(fake_sysfs)
        assert not got["forced"] and got["probe_mode"] == "never"
        assert "another mallocsweep run" in got["force_error"]
        assert (fake_sysfs / "enabled").read_text() == "always madvise [never]\n"  # untouched
    finally:
        os.close(other)
    got = thp_probe.prctl_blocks_madvise(fake_sysfs)  # free again: forced, and given back
    assert got["forced"] and (fake_sysfs / "enabled").read_text() == "never"
    assert lock.fd is None and lock.holders == 0  # released after the probe
