"""taskstats netlink messages: requests built byte for byte, replies recorded from a real kernel
(tests/fixtures/taskstats/record.py) parsed to the values /proc gave independently."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from collectors.errors import CollectorError
from collectors.taskstats import (
    GENL_ADMIN_PERM,
    OFF_AC_COMM,
    OFF_AC_PID,
    OFF_NVCSW,
    TASKSTATS_CMD_GET,
    TaskstatsTooOld,
    getfamily_request,
    message_error,
    nla,
    parse_attrs,
    parse_family,
    parse_tgid_reply,
    split_messages,
    tgid_request,
)

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "taskstats"
META = json.loads((FIX / "meta.json").read_text())


def _one(name: str):
    msgs = split_messages((FIX / name).read_bytes())
    assert len(msgs) == 1
    return msgs[0]


def test_getfamily_request_bytes():
    got = getfamily_request("TASKSTATS", 7)
    # nlmsghdr: len 36, type GENL_ID_CTRL 0x10, flags NLM_F_REQUEST, seq 7, port 0;
    # genlmsghdr: cmd CTRL_CMD_GETFAMILY 3, version 1; attr: len 14, CTRL_ATTR_FAMILY_NAME 2,
    # "TASKSTATS\0", padded to 16.
    want = (
        struct.pack("=IHHII", 36, 0x10, 1, 7, 0)
        + bytes([3, 1, 0, 0])
        + struct.pack("=HH", 14, 2)
        + b"TASKSTATS\0"
        + b"\0\0"
    )
    assert got == want


def test_tgid_request_bytes():
    got = tgid_request(31, 4242, 9)
    want = (
        struct.pack("=IHHII", 28, 31, 1, 9, 0)
        + bytes([TASKSTATS_CMD_GET, 1, 0, 0])
        + struct.pack("=HHI", 8, 2, 4242)  # TASKSTATS_CMD_ATTR_TGID
    )
    assert got == want


def test_recorded_family_reply():
    msg = _one("family.bin")
    assert msg.seq == META["family_seq"] and message_error(msg) is None
    family, ops = parse_family(msg)
    # The kernel sends the TGID reply with the family id as its message type: an independent check.
    assert family == _one("tgid.bin").type == META["family_id"]
    # TASKSTATS_CMD_GET is an admin command (root), as the doc says.
    assert ops[TASKSTATS_CMD_GET] & GENL_ADMIN_PERM


def test_recorded_tgid_reply_matches_proc_status():
    msg = _one("tgid.bin")
    assert msg.seq == META["tgid_seq"] and message_error(msg) is None
    r = parse_tgid_reply(msg)
    assert r.tgid == META["tgid"]
    # A stopped single-threaded process: /proc/PID/status is its whole-process count.
    assert (r.nvcsw, r.nivcsw) == (META["proc_status_voluntary"], META["proc_status_involuntary"])
    assert r.nvcsw >= 57  # it slept 57 times
    assert r.version >= 4 and r.size >= OFF_NVCSW + 16


def test_struct_offsets_from_the_header_land_on_known_fields():
    """In a per-task (PID) reply, ac_pid, ac_comm and nvcsw/nivcsw sit where the derivation in
    the module doc puts them (a TGID reply leaves the basic accounting fields zero)."""
    msg = _one("pid.bin")
    assert msg.seq == META["pid_seq"]
    aggr_pid = parse_attrs(msg.payload[4:])[4][0]  # TASKSTATS_TYPE_AGGR_PID
    stats = parse_attrs(aggr_pid)[3][0]
    assert struct.unpack_from("=I", stats, OFF_AC_PID)[0] == META["tgid"]
    comm = stats[OFF_AC_COMM : OFF_AC_COMM + 32].split(b"\0")[0].decode()
    assert comm == META["comm"]
    assert struct.unpack_from("=QQ", stats, OFF_NVCSW) == (
        META["proc_status_voluntary"],
        META["proc_status_involuntary"],
    )


def test_recorded_esrch_reply():
    import errno

    msg = _one("esrch.bin")
    assert msg.seq == META["esrch_seq"]
    assert message_error(msg) == errno.ESRCH


def _reply_with_stats(stats: bytes) -> bytes:
    inner = nla(2, struct.pack("=I", 77)) + nla(3, stats)
    body = bytes([2, 1, 0, 0]) + nla(5, inner)
    return struct.pack("=IHHII", 16 + len(body), 31, 0, 1, 0) + body


def test_old_struct_version_is_refused_with_a_typed_error():
    old = struct.pack("=H", 3) + b"\0" * 270  # version 3: ends before nvcsw
    with pytest.raises(TaskstatsTooOld, match="version 3"):
        parse_tgid_reply(split_messages(_reply_with_stats(old))[0])
    short = struct.pack("=H", 9) + b"\0" * 100  # claims a newer version but is cut short
    with pytest.raises(TaskstatsTooOld):
        parse_tgid_reply(split_messages(_reply_with_stats(short))[0])


def test_synthetic_reply_reads_nvcsw_at_its_offset():
    stats = bytearray(400)
    struct.pack_into("=H", stats, 0, 8)
    struct.pack_into("=QQ", stats, OFF_NVCSW, 123456789, 4242)
    r = parse_tgid_reply(split_messages(_reply_with_stats(bytes(stats)))[0])
    assert (r.tgid, r.version, r.nvcsw, r.nivcsw) == (77, 8, 123456789, 4242)


def test_malformed_bytes_raise_collector_error():
    with pytest.raises(CollectorError, match="malformed"):
        split_messages(struct.pack("=IHHII", 400, 31, 0, 1, 0) + b"\0" * 8)
    with pytest.raises(CollectorError, match="malformed"):
        parse_attrs(struct.pack("=HH", 40, 3) + b"\0" * 4)
    body = bytes([2, 1, 0, 0]) + nla(6, b"")
    msg = split_messages(struct.pack("=IHHII", 16 + len(body), 31, 0, 1, 0) + body)[0]
    with pytest.raises(CollectorError, match="AGGR_TGID"):
        parse_tgid_reply(msg)


class _FakeClient:
    """Answers our own TGID query with getrusage's figure (a kernel that keeps exited threads),
    less `lost` switches (one that drops them), or an error."""

    def __init__(self, lost: int = 0, error: Exception | None = None):
        self.lost, self.error = lost, error

    def read_tgid(self, tgid):
        import resource

        from collectors.taskstats import TaskstatsReading

        if self.error is not None:
            raise self.error
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return TaskstatsReading(tgid, 16, 560, ru.ru_nvcsw - self.lost, ru.ru_nivcsw)


def test_probe_verdicts_are_kept_but_read_failures_are_not(monkeypatch):
    from collectors import taskstats as ts

    monkeypatch.setattr(ts, "_probe_result", None)
    denied = ts.TaskstatsUnavailable("TASKSTATS_CMD_GET: Operation not permitted")
    with pytest.raises(ts.TaskstatsUnavailable, match="not permitted"):
        ts.check_usable(_FakeClient(error=denied))
    assert ts._probe_result is None  # a permission problem is no verdict on the kernel
    got = ts.check_usable(_FakeClient())
    assert got["probe_thread_switches"] == ts.PROBE_SLEEPS
    assert ts.check_usable(_FakeClient(lost=1000)) == got  # kept: not asked again

    monkeypatch.setattr(ts, "_probe_result", None)
    with pytest.raises(ts.TaskstatsLosesExitedThreads, match="lose exited threads"):
        ts.check_usable(_FakeClient(lost=ts.PROBE_SLEEPS))
    with pytest.raises(ts.TaskstatsLosesExitedThreads):
        ts.check_usable(_FakeClient())  # the verdict stands for the process
