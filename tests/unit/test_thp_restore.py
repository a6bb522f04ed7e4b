"""THP restore on a fake sysfs whose writes can fail: verified, loud, retried, never half done."""

from __future__ import annotations

import json
import os
import signal

import pytest

from suites.errors import SuiteError
from suites.runner import thp as thpmod

ORIGINAL = {"enabled": "madvise", "defrag": "madvise"}


class FakeSysfs:
    """Choice files as the kernel shows them; `fail` names files whose writes raise, `ignore`
    names files whose writes are silently dropped (a write that 'works' but does not take)."""

    def __init__(self, path):
        self.path = path
        path.mkdir()
        (path / "enabled").write_text("always [madvise] never\n")
        (path / "defrag").write_text("always defer defer+madvise [madvise] never\n")
        self.fail: set[str] = set()
        self.ignore: set[str] = set()
        self.writes: list[tuple[str, str]] = []
        self.on_write = None

    def write(self, ctl, name, value):
        self.writes.append((name, value))
        if self.on_write:
            self.on_write(name, value)
        if name in self.fail:
            raise OSError(1, "Operation not permitted")
        if name in self.ignore:
            return
        f = self.path / name
        words = f.read_text().replace("[", "").replace("]", "").split()
        if value not in words:
            raise OSError(22, "Invalid argument")
        f.write_text(" ".join(f"[{w}]" if w == value else w for w in words) + "\n")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setenv("MALLOCSWEEP_STATE", str(tmp_path / "state"))
    fs = FakeSysfs(tmp_path / "thp")
    monkeypatch.setattr(thpmod.ThpController, "_write", lambda self, n, v: fs.write(self, n, v))
    return fs


def controller(tmp_path, fake, defrag="system"):
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return thpmod.ThpController(run_dir, sysfs=fake.path, defrag=defrag)


def test_a_failed_restore_write_keeps_the_records_and_says_so(tmp_path, fake, capsys):
    ctl = controller(tmp_path, fake, defrag="never")
    ctl.apply("always")
    assert thpmod.current(fake.path) == {"enabled": "always", "defrag": "never"}
    fake.fail = {"defrag"}
    assert ctl.restore() is None  # not "restored": the runner must not record success
    assert "THP NOT RESTORED" in ctl.restore_error and "defrag" in ctl.restore_error
    assert "doctor --restore-thp" in ctl.restore_error
    assert "THP NOT RESTORED" in capsys.readouterr().err
    # Every value was still attempted: enabled is back even though defrag failed.
    assert thpmod.current(fake.path) == {"enabled": "madvise", "defrag": "never"}
    for f in (thpmod.pending_file(), tmp_path / "run" / thpmod.PENDING_NAME):
        rec = json.loads(f.read_text())
        assert rec["original"] == ORIGINAL and "THP NOT RESTORED" in rec["restore_error"]
    assert thpmod.leftover()["original"] == ORIGINAL  # doctor sees it
    assert ctl.original == ORIGINAL  # kept: atexit (or the next call) tries again
    fake.fail = set()
    assert ctl.restore() == ORIGINAL
    assert thpmod.current(fake.path) == ORIGINAL
    assert ctl.restore_error is None and thpmod.leftover() is None
    assert not (tmp_path / "run" / thpmod.PENDING_NAME).exists()


def test_a_write_that_does_not_take_is_not_success(tmp_path, fake):
    ctl = controller(tmp_path, fake)
    ctl.apply("never")
    fake.ignore = {"enabled"}
    assert ctl.restore() is None
    assert "enabled reads back 'never', not 'madvise'" in ctl.restore_error
    assert thpmod.leftover() is not None


def test_system_mode_after_a_failed_restore_fails_the_cell(tmp_path, fake):
    ctl = controller(tmp_path, fake)
    ctl.apply("always")
    fake.fail = {"enabled"}
    with pytest.raises(SuiteError, match="THP NOT RESTORED"):
        ctl.apply("system")  # never measure "system" under a setting we could not put back


def test_never_falls_back_to_prctl_when_the_sysfs_write_fails(tmp_path, fake):
    """writable() says yes (root), but the write itself is refused: per-server never instead."""
    fake.fail = {"enabled"}
    ctl = controller(tmp_path, fake)
    applied = ctl.apply("never")
    assert fake.writes[0] == ("enabled", "never")  # the write was really tried
    assert applied.method == "prctl" and applied.thp_disable
    assert applied.in_force["enabled"] == thpmod.PRCTL_NEVER
    assert applied.to_manifest()["system"] == ORIGINAL
    assert thpmod.current(fake.path) == ORIGINAL
    assert ctl.original is None and thpmod.leftover() is None


def test_signals_during_a_restore_wait_until_it_is_done(tmp_path, fake):
    ctl = controller(tmp_path, fake, defrag="never")
    ctl.apply("always")
    fake.on_write = lambda name, value: os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        ctl.restore()
    # The SIGINT came during the first write; both values were still written and verified.
    assert fake.writes[-2:] == [("enabled", "madvise"), ("defrag", "madvise")]
    assert thpmod.current(fake.path) == ORIGINAL
    assert ctl.original is None and thpmod.leftover() is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_machine_wide_record_is_found_by_doctor(tmp_path, fake, monkeypatch):
    """A run of the real sysfs also writes the root-owned record; leftover() reads it too."""
    system = tmp_path / "run-mallocsweep" / "thp-pending.json"
    monkeypatch.setattr(thpmod, "SYSTEM_PENDING", system)
    monkeypatch.setattr(thpmod, "SYSFS", fake.path)  # stands for the real sysfs here
    ctl = controller(tmp_path, fake)
    ctl.apply("always")
    assert json.loads(system.read_text())["original"] == ORIGINAL
    thpmod.pending_file().unlink()  # another user's HOME: only the machine-wide record is seen
    rec = thpmod.leftover()
    assert rec["original"] == ORIGINAL and rec["record_file"] == str(system)
    assert rec["runner_alive"]  # this test process
    assert ctl.restore() == ORIGINAL
    assert not system.exists() and thpmod.leftover() is None


def test_restore_leftover_verifies_and_clears_every_record(tmp_path, fake, monkeypatch):
    system = tmp_path / "run-mallocsweep" / "thp-pending.json"
    monkeypatch.setattr(thpmod, "SYSTEM_PENDING", system)
    monkeypatch.setattr(thpmod, "SYSFS", fake.path)
    ctl = controller(tmp_path, fake)
    ctl.apply("never")
    for f in (thpmod.pending_file(), system):  # the runner was SIGKILLed: its pid is gone
        rec = json.loads(f.read_text())
        f.write_text(json.dumps(rec | {"pid": 999_999_999}))
    ctl.original = None
    assert thpmod.restore_leftover()["original"] == ORIGINAL
    assert thpmod.current(fake.path) == ORIGINAL
    assert not system.exists() and not thpmod.pending_file().exists()
    assert not (tmp_path / "run" / thpmod.PENDING_NAME).exists()


def test_no_change_when_the_original_cannot_be_recorded(tmp_path, fake, monkeypatch):
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("")
    monkeypatch.setenv("MALLOCSWEEP_STATE", str(blocker / "sub"))
    ctl = controller(tmp_path, fake)
    with pytest.raises(SuiteError, match="cannot record the original THP values"):
        ctl.apply("always")
    assert fake.writes == [] and thpmod.current(fake.path) == ORIGINAL
