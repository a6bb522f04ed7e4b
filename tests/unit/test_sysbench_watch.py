"""The runner's sleep while a level runs: woken by a record written or by the child's exit."""

import subprocess
import sys
import threading
import time

from suites.workloads.level_loop import LevelWatch


def test_a_write_to_the_records_wakes_it(tmp_path):
    rec = tmp_path / "r.jsonl"
    rec.touch()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        w = LevelWatch(rec, child.pid, poll_s=0.05)
        assert w.mode == "inotify+pidfd"
        t = threading.Timer(0.3, lambda: rec.open("a").write("{}\n"))
        t.start()
        t0 = time.monotonic()
        w.wait(10)
        assert 0.2 < time.monotonic() - t0 < 5
        t0 = time.monotonic()
        w.wait(0.3)  # the event was drained: nothing new, so it sleeps the whole timeout
        assert time.monotonic() - t0 >= 0.25
        w.close()
    finally:
        child.kill()
        child.wait()


def test_the_child_s_exit_wakes_it(tmp_path):
    rec = tmp_path / "r.jsonl"
    rec.touch()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    w = LevelWatch(rec, child.pid, poll_s=0.05)
    t0 = time.monotonic()
    w.wait(10)
    assert time.monotonic() - t0 < 5
    child.wait()
    w.close()


def test_without_a_file_to_watch_it_falls_back_to_polling(tmp_path):
    w = LevelWatch(tmp_path / "missing.jsonl", 1, poll_s=0.01)
    assert w.mode == "polling"
    t0 = time.monotonic()
    w.wait(5)
    assert time.monotonic() - t0 < 1
    w.close()
