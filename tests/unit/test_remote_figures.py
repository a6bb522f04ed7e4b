"""The client host's figures and clock, from recorded /proc and shell output (suites.remote)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.remote import hostload
from suites.remote.clock import best_offset
from suites.remote.ssh import explain

FIX = Path(__file__).resolve().parents[1] / "fixtures/remote"


def test_parse_reads_cpu_ctxt_network_and_clock_from_a_real_proc():
    before = hostload.parse((FIX / "load_before.txt").read_text())
    assert len(before["cpu"]) == 10 and before["ctxt"] > 0
    assert before["rx_bytes"] > 0 and before["tx_bytes"] > 0
    assert before["t_s"] > 1.7e9  # ns since the epoch read as seconds


def test_loopback_is_not_client_traffic():
    text = (FIX / "load_before.txt").read_text()
    only_lo = "\n".join(
        ln for ln in text.splitlines() if ":" not in ln or ln.strip().startswith("lo:")
    )
    got = hostload.parse(only_lo)
    assert got["rx_bytes"] == 0 and got["tx_bytes"] == 0


def test_delta_of_two_real_readings():
    b = hostload.parse((FIX / "load_before.txt").read_text())
    a = hostload.parse((FIX / "load_after.txt").read_text())
    d = hostload.delta("bench@client", b, a, 100)
    assert d["client_host"] == "bench@client"
    assert 1.0 <= d["client_wall_s"] < 2.0  # the two readings were taken a second apart
    assert d["client_cpu_user_s"] >= 0 and d["client_cpu_sys_s"] >= 0
    assert 0 <= d["client_cpu_busy_pct"] <= 100
    assert d["client_ctxsw"] == a["ctxt"] - b["ctxt"] > 0
    assert set(d) | {"client_sysbench_user_s", "client_sysbench_sys_s"} == set(
        hostload.CLIENT_COLUMNS
    )


def test_delta_arithmetic_on_known_jiffies():
    b = {"cpu": [100, 0, 50, 1000, 0, 0, 0, 0, 0, 0], "ctxt": 10, "rx_bytes": 0, "tx_bytes": 0,
         "t_s": 0.0}  # fmt: skip
    a = {"cpu": [300, 100, 150, 1200, 100, 0, 100, 0, 0, 0], "ctxt": 60, "rx_bytes": 2048,
         "tx_bytes": 1024, "t_s": 2.0}  # fmt: skip
    d = hostload.delta("h", b, a, 100)
    assert d["client_cpu_user_s"] == 3.0  # (200 user + 100 nice) / 100
    assert d["client_cpu_sys_s"] == 2.0  # (100 system + 100 softirq) / 100
    assert d["client_cpu_busy_pct"] == pytest.approx(100 * 500 / 800, abs=0.1)
    assert (d["client_ctxsw"], d["client_net_rx_kb"], d["client_net_tx_kb"]) == (50, 2.0, 1.0)


@pytest.mark.parametrize(
    ("name", "user", "system"), [("times_bash.txt", 0.201, 0.004), ("times_dash.txt", 0.1, 0.0)]
)
def test_sysbench_cpu_from_the_shells_times(name, user, system):
    got = hostload.sysbench_cpu((FIX / name).read_text())
    assert got == {"client_sysbench_user_s": user, "client_sysbench_sys_s": system}


def test_sysbench_cpu_is_empty_when_the_shell_never_got_there():
    assert hostload.sysbench_cpu("") == {
        "client_sysbench_user_s": None,
        "client_sysbench_sys_s": None,
    }


def test_missing_proc_lines_are_an_error_not_a_zero():
    with pytest.raises(ValueError, match="ctxt"):
        hostload.parse("cpu  1 2 3 4 5 6 7 8 0 0\n1764000000000000000\n")


def test_best_offset_takes_the_minimum_delay_round_trip():
    # (t0, remote, t1): the second exchange was the fastest; its midpoint decides.
    samples = [(10.0, 15.30, 10.40), (11.0, 16.02, 11.02), (12.0, 17.5, 12.9)]
    got = best_offset(samples)
    assert got["offset_s"] == pytest.approx(5.01)
    assert got["uncertainty_s"] == pytest.approx(0.01)
    assert got["rtt_max_s"] == pytest.approx(0.9)
    with pytest.raises(ValueError):
        best_offset([])


@pytest.mark.parametrize(
    ("stderr", "why"),
    [
        ("root@10.213.5.2: Permission denied (publickey).", "the key was refused"),
        ("ssh: connect to host 10.213.5.2 port 1: Connection refused", "nothing listens"),
        ("ssh: connect to host 10.9.9.9 port 22: Connection timed out", "does not answer"),
        ("Host key verification failed.", "host key"),
    ],
)
def test_ssh_errors_are_explained(stderr, why):
    text = explain(stderr)
    assert why in text and stderr.strip() in text
