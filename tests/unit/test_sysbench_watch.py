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
        assert w.wait(10) == "record"  # woken by the write, not by the timeout
        assert time.monotonic() - t0 >= 0.2  # the write came 0.3 s in: it slept until then
        t.join()
        t0 = time.monotonic()
        # the event was drained: nothing new, so it sleeps the whole timeout
        assert w.wait(0.3) == "timeout"
        assert time.monotonic() - t0 >= 0.3 - 0.01
        w.close()
    finally:
        child.kill()
        child.wait()


def test_the_child_s_exit_wakes_it(tmp_path):
    rec = tmp_path / "r.jsonl"
    rec.touch()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    w = LevelWatch(rec, child.pid, poll_s=0.05)
    assert w.wait(10) == "exit"  # woken by the exit, not by the timeout
    child.wait()
    w.close()


def test_without_a_file_to_watch_it_falls_back_to_polling(tmp_path):
    w = LevelWatch(tmp_path / "missing.jsonl", 1, poll_s=0.01)
    assert w.mode == "polling"
    assert w.wait(5) == "poll"  # one poll interval (0.01 s), never the whole timeout
    w.close()
