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
