"""Stand-in hosts for the tests: a network namespace with its own sshd, reached over a veth pair.

Each host is a namespace `ms<pid>h<n>`, a veth pair whose host side holds 10.213.X.1/30 and whose
namespace side 10.213.X.2/30 (X chosen so no interface of the machine is on that /30), and an sshd
started inside the namespace as our child, on a throwaway host key, accepting only a throwaway
client key; keys, sshd_config, known_hosts and an ssh_config naming the host live in a temp
directory. Nothing of the system's SSH setup is read or changed (sshd -f, ssh -F).

remove() takes everything down (sshd and any process left in the namespace, the namespace and
with it the veth pair, the temp directory) and is safe on a half-built host; leftovers() says what
of it still exists, so a test can assert that nothing outlived it.

A namespace shares this machine's filesystem and process table: the code under test must not
rely on that, and the tests check what crossed the connection, not the files.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SUBNET = ipaddress.ip_network("10.213.0.0/16")
SSHD = "/usr/sbin/sshd"


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    argv = ["ip", *args] if ns is None else ["ip", "netns", "exec", ns, "ip", *args]
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=30)


def _used_networks() -> list[ipaddress.IPv4Network]:
    out = _ip("-4", "-o", "addr", "show").stdout
    nets = []
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            nets.append(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    return nets


def free_slash30(taken: set[int]) -> int:
    """An X with 10.213.X.0/30 overlapping no address of this machine (nor one we took)."""
    used = _used_networks()
    start = os.getpid() % 200
    for i in range(250):
        x = (start + i) % 250 + 1
        net = ipaddress.ip_network(f"10.213.{x}.0/30")
        if x not in taken and not any(net.overlaps(u) for u in used):
            return x
    raise RuntimeError("no free /30 in 10.213.0.0/16 for a test host")


def sshd_available() -> str | None:
    """Why stand-in hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not Path(SSHD).is_file():
        return "openssh-server is not installed (make deps installs it)"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


class NetnsHost:
    def __init__(self, n: int, x: int, alias: str):
        self.n = n
        self.ns = f"ms{os.getpid()}h{n}"
        self.veth_host = f"ms{os.getpid() % 100000}v{n}a"
        self.veth_ns = f"ms{os.getpid() % 100000}v{n}b"
        self.host_address = f"10.213.{x}.1"
        self.address = f"10.213.{x}.2"
        self.alias = alias
        self.dir = Path(tempfile.mkdtemp(prefix=f"ms-netns{n}-"))
        self.sshd: subprocess.Popen | None = None
        self.key = self.dir / "client_key"

    # -- building -----------------------------------------------------------------------------
    def create(self) -> None:
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.veth_host, "type", "veth", "peer", "name", self.veth_ns)
        _ip("link", "set", self.veth_ns, "netns", self.ns)
        _ip("addr", "add", f"{self.host_address}/30", "dev", self.veth_host)
        _ip("link", "set", self.veth_host, "up")
        _ip("addr", "add", f"{self.address}/30", "dev", self.veth_ns, ns=self.ns)
        _ip("link", "set", self.veth_ns, "up", ns=self.ns)
        _ip("link", "set", "lo", "up", ns=self.ns)
        self._keys()
        self._start_sshd()

    def _keys(self) -> None:
        for name in ("host_key", "client_key", "refused_key", "nosysbench_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"ms-test-{name}", "-f",
                 str(self.dir / name)],
                check=True,
                capture_output=True,
                timeout=30,
            )  # fmt: skip
        # refused_key is never authorized; nosysbench_key logs in to a session whose PATH holds
        # no sysbench (the same machine's files are visible from the namespace: a host without
        # sysbench is made by its PATH).
        empty = self.dir / "empty-bin"
        empty.mkdir()
        nosb = (self.dir / "nosysbench_key.pub").read_text().strip()
        (self.dir / "authorized_keys").write_text(
            (self.dir / "client_key.pub").read_text().strip()
            + f'\nenvironment="PATH={empty}" {nosb}\n'
        )
        host_pub = (self.dir / "host_key.pub").read_text().split()
        (self.dir / "known_hosts").write_text(f"{self.address} {host_pub[0]} {host_pub[1]}\n")
        (self.dir / "sshd_config").write_text(
            f"ListenAddress {self.address}\n"
            "Port 22\n"
            f"HostKey {self.dir / 'host_key'}\n"
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}\n"
            f"PidFile {self.dir / 'sshd.pid'}\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\n"
            "PermitUserEnvironment PATH\n"
            "PermitRootLogin prohibit-password\n"
            "StrictModes no\n"
            "UsePAM no\n"
            "MaxSessions 50\n"
            "Subsystem sftp internal-sftp\n"
            "MaxStartups 50\n"
        )
        self.write_ssh_config(self.dir / "ssh_config", [self])

    @staticmethod
    def write_ssh_config(path: Path, hosts: list[NetnsHost], key: Path | None = None) -> Path:
        """An ssh_config naming each host by its alias, and each also as ALIAS-refused (a key it
        does not accept), ALIAS-nosysbench (a session without sysbench on PATH) and ALIAS-closed
        (a port nothing listens on)."""
        text = ""
        for h in hosts:
            for alias, ident, port in (
                (h.alias, key or h.key, 22),
                (f"{h.alias}-refused", h.dir / "refused_key", 22),
                (f"{h.alias}-nosysbench", h.dir / "nosysbench_key", 22),
                (f"{h.alias}-closed", h.key, 1),
            ):
                text += (
                    f"Host {alias}\n"
                    f"  HostName {h.address}\n"
                    f"  Port {port}\n"
                    "  User root\n"
                    f"  IdentityFile {ident}\n"
                    "  IdentitiesOnly yes\n"
                    f"  UserKnownHostsFile {h.dir / 'known_hosts'}\n"
                    "  StrictHostKeyChecking yes\n"
                    "  LogLevel ERROR\n"
                )
        Path(path).write_text(text)
        return Path(path)

    def _start_sshd(self) -> None:
        # sshd's privilege separation directory (an empty, root-owned directory it insists on).
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.sshd = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, SSHD, "-D", "-e", "-f", str(self.dir / "sshd_config")],
            stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "sshd.log", "ab"),
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.sshd.poll() is not None:
                raise RuntimeError(
                    f"sshd in {self.ns} exited: {(self.dir / 'sshd.log').read_text()}"
                )
            try:
                with socket.create_connection((self.address, 22), timeout=1):
                    return
            except OSError:
                try:  # waits on sshd itself: returns at once should it exit
                    self.sshd.wait(0.05)
                except subprocess.TimeoutExpired:
                    pass
        raise RuntimeError(f"sshd in {self.ns} did not listen within 20 s")

    def route_to(self, address: str) -> None:
        """A route from the namespace to one more address of this machine (another host's
        host-side address, which a server bound for several client hosts listens on): over
        this host's own veth, to that /32 only."""
        _ip("route", "add", f"{address}/32", "dev", self.veth_ns, ns=self.ns)

    # -- taking down --------------------------------------------------------------------------
    def pids(self) -> list[int]:
        r = subprocess.run(["ip", "netns", "pids", self.ns], capture_output=True, text=True)
        return [int(p) for p in r.stdout.split() if p.isdigit()] if r.returncode == 0 else []

    def remove(self) -> None:
        if self.sshd is not None and self.sshd.poll() is None:
            try:
                os.killpg(self.sshd.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.sshd.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.sshd.pid, signal.SIGKILL)
                self.sshd.wait(10)
        for pid in self.pids():  # only processes inside our namespace: ours
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _ip("netns", "del", self.ns, check=False)  # takes the veth pair with it
        _ip("link", "del", self.veth_host, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def leftovers(self) -> list[str]:
        out = []
        if self.ns in _ip("netns", "list").stdout.split():
            out.append(f"namespace {self.ns}")
        if _ip("link", "show", self.veth_host, check=False).returncode == 0:
            out.append(f"veth {self.veth_host}")
        if self.sshd is not None and self.sshd.poll() is None:
            out.append(f"sshd pid {self.sshd.pid}")
        if self.dir.exists():
            out.append(f"directory {self.dir}")
        return out


def make_hosts(count: int) -> list[NetnsHost]:
    """`count` stand-in hosts (aliases msclient1, msclient2, ...); removed on any failure."""
    hosts: list[NetnsHost] = []
    taken: set[int] = set()
    try:
        for n in range(1, count + 1):
            x = free_slash30(taken)
            taken.add(x)
            h = NetnsHost(n, x, f"msclient{n}")
            hosts.append(h)
            h.create()
    except BaseException:
        for h in hosts:
            h.remove()
        raise
    return hosts
