"""The kernel's taskstats interface (generic netlink): whole-process context switches, no tracing.

One request, TASKSTATS_CMD_GET with TASKSTATS_CMD_ATTR_TGID, returns a `struct taskstats` for a
whole thread group. Its nvcsw/nivcsw are the totals kept for threads that already exited
(signal->stats, added by fill_tgid_exit() as each thread exits) plus, walked at the time of the
request, every live thread's own counters: the same figures wait4's ru_nvcsw/ru_nivcsw give at
exit, readable at any time. Nothing is attached to the server's threads, so unlike perf counters
with inherit=1 it costs the server nothing between reads; a read costs the kernel one walk over
the group's threads, in our own system call (see TaskstatsClient.read_tgid for what one read
costs). The walk holds the group's siglock with interrupts off: a server thread that needs it at
that moment (signal delivery, sigprocmask, thread creation or exit) waits up to that long, which
is why reads stay at phase boundaries, 1 Hz samples and 2 Hz window marks.

Three kernel facts decide whether the figures can be trusted, and are checked here, not assumed:
- Permission: TASKSTATS_CMD_GET is registered with GENL_ADMIN_PERM (the family's op flags say so;
  `op_flags` reads them), so it needs CAP_NET_ADMIN: root. The family exists only with
  CONFIG_TASKSTATS and only in the initial network namespace (a container with its own network
  namespace does not see it).
- The struct's layout: nvcsw/nivcsw exist from struct version 4 on (below).
- Exited threads: until the 2026 fix "taskstats: retain dead thread stats in TGID queries"
  (Cc: stable), fill_tgid_exit() folded only the delay-accounting fields into signal->stats, so a
  TGID query *forgot the switches of every thread that had exited* — exactly what /proc's task
  sum gets wrong. The fix did not change the struct version, so the version cannot tell; a probe
  can: `probe_exited_threads()` makes a thread of ours switch and exit, then compares our own TGID
  reading with getrusage(RUSAGE_SELF), which keeps exited threads on every kernel.

struct taskstats offsets (include/uapi/linux/taskstats.h; every field is naturally aligned, and
the header forces 8-byte alignment where it says `__attribute__((aligned(8)))`):
    0 version u16, 4 ac_exitcode u32, 8 ac_flag u8, 9 ac_nice u8,
    16 cpu_count (aligned 8) .. 72 cpu_run_virtual_total: 8 u64 delay fields   -> version 1 = 80 bytes
    80 ac_comm char[32], 112 ac_sched u8 (aligned 8), 113 ac_pad[3],
    120 ac_uid (aligned 8), 124 ac_gid, 128 ac_pid, 132 ac_ppid, 136 ac_btime (u32 each),
    144 ac_etime (aligned 8), 152 ac_utime, 160 ac_stime, 168 ac_minflt, 176 ac_majflt,
    184 coremem, 192 virtmem, 200 hiwater_rss, 208 hiwater_vm,
    216 read_char, 224 write_char, 232 read_syscalls, 240 write_syscalls,
    248 read_bytes, 256 write_bytes, 264 cancelled_write_bytes  -> version 3 (I/O accounting, 2006)
    272 nvcsw, 280 nivcsw                      -> added next, by "taskstats: add context-switch
                                                 counters" (b663a79c1915, Linux 2.6.23): version 4
Later versions only append (version 16 here: 560 bytes).
"""

from __future__ import annotations

import errno
import os
import resource
import socket
import struct
import threading
import time
from dataclasses import dataclass

from collectors.errors import CollectorError, ProcessGone

# <linux/netlink.h>
NETLINK_GENERIC = 16
NLM_F_REQUEST = 0x01
NLMSG_ERROR = 0x2
NLMSG_DONE = 0x3
NLA_TYPE_MASK = ~((1 << 15) | (1 << 14)) & 0xFFFF  # without NLA_F_NESTED, NLA_F_NET_BYTEORDER
_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid (host byte order)
_GENLMSGHDR = struct.Struct("=BBH")  # cmd, version, reserved
_NLATTR = struct.Struct("=HH")  # len, type

# <linux/genetlink.h>
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
CTRL_ATTR_OPS = 6
CTRL_ATTR_OP_ID = 1
CTRL_ATTR_OP_FLAGS = 2
GENL_ADMIN_PERM = 0x01

# <linux/taskstats.h>
TASKSTATS_GENL_NAME = "TASKSTATS"
TASKSTATS_GENL_VERSION = 1
TASKSTATS_CMD_GET = 1
TASKSTATS_CMD_ATTR_PID = 1
TASKSTATS_CMD_ATTR_TGID = 2
TASKSTATS_TYPE_PID = 1
TASKSTATS_TYPE_TGID = 2
TASKSTATS_TYPE_STATS = 3
TASKSTATS_TYPE_AGGR_TGID = 5

# struct taskstats (see the module doc for the derivation)
OFF_VERSION = 0
OFF_AC_COMM = 80
OFF_AC_PID = 128
OFF_NVCSW = 272
OFF_NIVCSW = 280
MIN_VERSION = 4  # the first version with nvcsw/nivcsw
MIN_SIZE = OFF_NIVCSW + 8

REPLY_TIMEOUT_S = 5.0  # the kernel answers at once; a silent socket means something is wrong


class TaskstatsUnavailable(CollectorError):
    """taskstats cannot be used here (no family, no permission, too old a struct, a kernel that
    drops exited threads); the message says why and what would make it work."""


class TaskstatsTooOld(TaskstatsUnavailable):
    """The kernel's struct taskstats predates nvcsw/nivcsw (version < MIN_VERSION)."""


class TaskstatsLosesExitedThreads(TaskstatsUnavailable):
    """The kernel's TGID readings forget the switches of threads that have exited."""


@dataclass(frozen=True)
class TaskstatsReading:
    """What a TGID reply says about one thread group."""

    tgid: int
    version: int
    size: int  # bytes of struct taskstats the kernel sent
    nvcsw: int
    nivcsw: int


# -- message building and parsing (pure: unit-tested on recorded bytes) --------------------------
def nla(attr_type: int, payload: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    n = _NLATTR.size + len(payload)
    return _NLATTR.pack(n, attr_type) + payload + b"\0" * (-n % 4)


def genl_request(family: int, cmd: int, attrs: bytes, seq: int, version: int = 1) -> bytes:
    body = _GENLMSGHDR.pack(cmd, version, 0) + attrs
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), family, NLM_F_REQUEST, seq, 0) + body


def getfamily_request(name: str, seq: int) -> bytes:
    return genl_request(
        GENL_ID_CTRL, CTRL_CMD_GETFAMILY, nla(CTRL_ATTR_FAMILY_NAME, name.encode() + b"\0"), seq
    )


def tgid_request(family: int, tgid: int, seq: int, attr: int = TASKSTATS_CMD_ATTR_TGID) -> bytes:
    """TASKSTATS_CMD_GET for a thread group (or, with TASKSTATS_CMD_ATTR_PID, for one task: the
    fixtures use that to check the struct offsets, which a TGID reply leaves zero)."""
    return genl_request(
        family, TASKSTATS_CMD_GET, nla(attr, struct.pack("=I", tgid)), seq, TASKSTATS_GENL_VERSION
    )


def parse_attrs(data: bytes) -> dict[int, list[bytes]]:
    """Attribute type -> payloads, in order (nested attributes stay as bytes)."""
    out: dict[int, list[bytes]] = {}
    i = 0
    while i + _NLATTR.size <= len(data):
        n, t = _NLATTR.unpack_from(data, i)
        if n < _NLATTR.size or i + n > len(data):
            raise CollectorError(f"taskstats: malformed netlink attribute at byte {i} (len {n})")
        out.setdefault(t & NLA_TYPE_MASK, []).append(data[i + _NLATTR.size : i + n])
        i += (n + 3) & ~3
    return out


@dataclass(frozen=True)
class Message:
    type: int
    seq: int
    payload: bytes  # after the nlmsghdr


def split_messages(data: bytes) -> list[Message]:
    out = []
    i = 0
    while i + _NLMSGHDR.size <= len(data):
        n, typ, _flags, seq, _pid = _NLMSGHDR.unpack_from(data, i)
        if n < _NLMSGHDR.size or i + n > len(data):
            raise CollectorError(f"taskstats: malformed netlink message at byte {i} (len {n})")
        out.append(Message(typ, seq, data[i + _NLMSGHDR.size : i + n]))
        i += (n + 3) & ~3
    return out


def message_error(msg: Message) -> int | None:
    """The positive errno of an NLMSG_ERROR message (0 for an ack), None for any other type."""
    if msg.type != NLMSG_ERROR:
        return None
    (err,) = struct.unpack_from("=i", msg.payload, 0)
    return -err


def _genl_attrs(msg: Message) -> dict[int, list[bytes]]:
    return parse_attrs(msg.payload[_GENLMSGHDR.size :])


def parse_family(msg: Message) -> tuple[int, dict[int, int]]:
    """(family id, {command: flags}) from a CTRL_CMD_GETFAMILY reply."""
    attrs = _genl_attrs(msg)
    if CTRL_ATTR_FAMILY_ID not in attrs:
        raise CollectorError("taskstats: the family reply has no CTRL_ATTR_FAMILY_ID")
    (family,) = struct.unpack_from("=H", attrs[CTRL_ATTR_FAMILY_ID][0])
    ops: dict[int, int] = {}
    for blob in attrs.get(CTRL_ATTR_OPS, []):
        for op in (p for payloads in parse_attrs(blob).values() for p in payloads):
            a = parse_attrs(op)
            if CTRL_ATTR_OP_ID in a:
                (op_id,) = struct.unpack_from("=I", a[CTRL_ATTR_OP_ID][0])
                flags = a.get(CTRL_ATTR_OP_FLAGS)
                ops[op_id] = struct.unpack_from("=I", flags[0])[0] if flags else 0
    return family, ops


def parse_tgid_reply(msg: Message) -> TaskstatsReading:
    """The reading in a TASKSTATS_CMD_GET reply for a TGID (TaskstatsTooOld below version 4)."""
    attrs = _genl_attrs(msg)
    if TASKSTATS_TYPE_AGGR_TGID not in attrs:
        raise CollectorError(
            f"taskstats: reply without TASKSTATS_TYPE_AGGR_TGID (attributes {sorted(attrs)})"
        )
    inner = parse_attrs(attrs[TASKSTATS_TYPE_AGGR_TGID][0])
    ids = inner.get(TASKSTATS_TYPE_TGID) or inner.get(TASKSTATS_TYPE_PID)
    stats = inner.get(TASKSTATS_TYPE_STATS)
    if not ids or not stats:
        raise CollectorError(f"taskstats: incomplete TGID reply (attributes {sorted(inner)})")
    (tgid,) = struct.unpack_from("=I", ids[0])
    st = stats[0]
    (version,) = struct.unpack_from("=H", st, OFF_VERSION)
    if version < MIN_VERSION or len(st) < MIN_SIZE:
        raise TaskstatsTooOld(
            f"struct taskstats version {version} ({len(st)} bytes) has no context-switch "
            f"counters (nvcsw/nivcsw need version >= {MIN_VERSION}, {MIN_SIZE} bytes)"
        )
    nvcsw, nivcsw = struct.unpack_from("=QQ", st, OFF_NVCSW)
    return TaskstatsReading(tgid, version, len(st), nvcsw, nivcsw)


# -- the client -----------------------------------------------------------------------------------
class TaskstatsClient:
    """One generic-netlink socket and the TASKSTATS family id. Thread-safe (one lock around each
    request and its reply): the sampler, the window marks and the runner share one client."""

    def __init__(self):
        try:
            self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        except OSError as e:
            raise TaskstatsUnavailable(f"generic netlink socket: {e.strerror or e}") from None
        try:
            self._sock.bind((0, 0))
            self._sock.settimeout(REPLY_TIMEOUT_S)
            self._lock = threading.Lock()
            self._seq = int(time.monotonic_ns() & 0x7FFFFFFF)
            self.family, self.op_flags = self._family()
        except BaseException:
            self._sock.close()
            raise

    def _request(self, data: bytes, seq: int) -> Message:
        with self._lock:
            self._sock.send(data)
            while True:
                try:
                    buf = self._sock.recv(65536)
                except TimeoutError:
                    raise CollectorError(
                        f"taskstats: no reply within {REPLY_TIMEOUT_S:g} s"
                    ) from None
                for msg in split_messages(buf):
                    if msg.seq == seq:  # a late reply to an abandoned request is skipped
                        return msg

    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) & 0x7FFFFFFF
        return self._seq

    def _family(self) -> tuple[int, dict[int, int]]:
        seq = self._next_seq()
        msg = self._request(getfamily_request(TASKSTATS_GENL_NAME, seq), seq)
        err = message_error(msg)
        if err == errno.ENOENT:
            raise TaskstatsUnavailable(
                "the kernel has no TASKSTATS genetlink family (built without CONFIG_TASKSTATS, or "
                "this process is not in the initial network namespace, e.g. in a container)"
            )
        if err:
            raise TaskstatsUnavailable(f"resolving the TASKSTATS family: {os.strerror(err)}")
        return parse_family(msg)

    @property
    def needs_admin(self) -> bool | None:
        """Whether TASKSTATS_CMD_GET requires CAP_NET_ADMIN, as the kernel declares it."""
        flags = self.op_flags.get(TASKSTATS_CMD_GET)
        return None if flags is None else bool(flags & GENL_ADMIN_PERM)

    def read_tgid(self, tgid: int) -> TaskstatsReading:
        """The thread group's counters now (ProcessGone once it has been reaped).

        Cost, measured on the development VM (kernel 6.18): 18 µs of our CPU per read of a
        2-thread process, 0.05-0.1 ms per read of a process with 1537 threads (the kernel walks
        every live thread, in our system call; 200 reads, with and without the sampler's /proc
        reads between them). A whole sampler reading of a 1501-thread process took 0.19-0.28 ms
        with taskstats, 0.14-0.17 ms with perf (tests/integration/test_collectors.py): at 1 Hz
        samples and 2 Hz window marks, < 0.05% of a core. perf's reads are cheaper, but perf's
        inherited events cost every switch of every server thread.
        """
        seq = self._next_seq()
        msg = self._request(tgid_request(self.family, tgid, seq), seq)
        err = message_error(msg)
        if err == errno.ESRCH:
            raise ProcessGone(tgid, "taskstats")
        if err in (errno.EPERM, errno.EACCES):
            raise TaskstatsUnavailable(
                f"TASKSTATS_CMD_GET: {os.strerror(err)} (it needs CAP_NET_ADMIN: run as root)"
            )
        if err:
            raise TaskstatsUnavailable(f"TASKSTATS_CMD_GET for {tgid}: {os.strerror(err)}")
        reading = parse_tgid_reply(msg)
        if reading.tgid != tgid:
            raise CollectorError(f"taskstats: asked for {tgid}, the reply is for {reading.tgid}")
        return reading

    def close(self) -> None:
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- does this kernel keep exited threads? ------------------------------------------------------
PROBE_SLEEPS = 40  # voluntary switches of the probe thread: far above any race slack
PROBE_SLACK = 8  # switches of our other threads between the readings that may land in either


def probe_exited_threads(client: TaskstatsClient) -> dict:
    """Prove that TGID readings keep the switches of threads that have exited.

    A thread of ours sleeps PROBE_SLEEPS times (each a voluntary switch) and exits. Then our own
    TGID reading is taken between two getrusage(RUSAGE_SELF) calls (the kernel's whole-process
    counts, exited threads included, on every kernel). A kernel that drops exited threads is
    short by at least the probe thread's switches; one that keeps them lies between the two.
    Raises TaskstatsLosesExitedThreads when the reading misses them (and TaskstatsUnavailable,
    ProcessGone... when the reading cannot be taken). Takes ~10 ms.
    """

    def sleeper() -> None:
        for _ in range(PROBE_SLEEPS):
            time.sleep(0.0001)

    t = threading.Thread(target=sleeper, name="mallocsweep-taskstats-probe")
    t.start()
    t.join()
    before = resource.getrusage(resource.RUSAGE_SELF)
    got = client.read_tgid(os.getpid())
    after = resource.getrusage(resource.RUSAGE_SELF)
    out = {
        "taskstats_voluntary": got.nvcsw,
        "rusage_voluntary": [before.ru_nvcsw, after.ru_nvcsw],
        "probe_thread_switches": PROBE_SLEEPS,
        "struct_version": got.version,
    }
    if not before.ru_nvcsw - PROBE_SLACK <= got.nvcsw <= after.ru_nvcsw + PROBE_SLACK:
        raise TaskstatsLosesExitedThreads(
            f"this kernel's TGID taskstats lose exited threads: {got.nvcsw} voluntary switches "
            f"for this process vs getrusage's {before.ru_nvcsw}-{after.ru_nvcsw} after a thread "
            f"of {PROBE_SLEEPS} switches exited (needs 'taskstats: retain dead thread stats in "
            "TGID queries', 2026, or a stable kernel with it)"
        )
    return out


_probe_lock = threading.Lock()
_probe_result: dict | TaskstatsLosesExitedThreads | None = None


def check_usable(client: TaskstatsClient) -> dict:
    """probe_exited_threads(), its verdict kept for the process (the kernel does not change under
    us). Only a verdict is kept: a probe that could not read (no permission...) is tried again."""
    global _probe_result
    with _probe_lock:
        if _probe_result is None:
            try:
                _probe_result = probe_exited_threads(client)
            except TaskstatsLosesExitedThreads as e:
                _probe_result = e
        if isinstance(_probe_result, TaskstatsLosesExitedThreads):
            raise TaskstatsLosesExitedThreads(str(_probe_result))
        return dict(_probe_result)
