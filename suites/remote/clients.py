"""sysbench on a client host: checked before the run, fed what it needs, run level by level.

Nothing is assumed about the client host's files: our Lua wrapper is copied into a private
directory there (mktemp -d, removed at the end), sysbench is the one on its PATH, and the server is
reached over TCP at the suite's clients.server_address. A level runs as

    ssh HOST 'cd DIR; exec 3>&1 1>&2; env -i ... timeout -s KILL T sysbench ... & echo $! > TAG.pid;
              wait $!; times > TAG.times'

sysbench's records (the wrapper writes to $MALLOCSWEEP_OUT = /dev/fd/3) come back on ssh's stdout
into the local records file, so the level runner follows them exactly as it does a local
sysbench's; its human-readable output comes back on ssh's stderr into the level's log. `timeout`
makes itself a process-group leader (its pid, written to TAG.pid), so a level we stop (deadline,
Ctrl-C) is ended on the host by killing that group, and `timeout` ends it there by itself should
the connection be lost. The shell's `times` after the wait is sysbench's own CPU on the host.
"""

from __future__ import annotations

import errno
import json
import shlex
import socket
import threading
from pathlib import Path

from suites.errors import SuiteError
from suites.remote import clock, hostload
from suites.remote.identity import identity
from suites.remote.ssh import SshHost

# One socket per client thread, plus sysbench's own files and a margin.
NOFILE_MARGIN = 256
_PATH = "/usr/local/bin:/usr/bin:/bin"
# A split level's start on a host (level_command's barrier): "ready" and "start" records with the
# host's clock on the records stream (fd 3), the go read from ssh's stdin in between.
_BARRIER = (
    'printf \'{"type":"ready","t_ns":%s}\\n\' $(date +%s%N) >&3; '
    "read -r _go || exit 1; "
    'printf \'{"type":"start","t_ns":%s}\\n\' $(date +%s%N) >&3; '
)


def _reachability_listener(address: str) -> tuple[socket.socket, list]:
    """A listener on `address` (an ephemeral port) that notes who connected: the client host's
    probe must arrive here, on this machine, at the address the server will bind."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.bind((address, 0))
    except OSError as e:
        s.close()
        why = (
            "not an address of this machine"
            if e.errno == errno.EADDRNOTAVAIL
            else e.strerror or str(e)
        )
        raise SuiteError(f"clients.server_address {address}: cannot bind it: {why}") from None
    s.listen(4)
    s.settimeout(15)
    seen: list = []

    def accept():
        try:
            conn, peer = s.accept()
            seen.append(peer[0])
            conn.close()
        except OSError:
            pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    return s, [t, seen]


class RemoteClients:
    """One client host: open() checks it and prepares it, close() leaves nothing there (several
    hosts: suites.remote.hosts.ClientHosts holds one of these per host)."""

    def __init__(
        self,
        clients_section,
        max_threads: int,
        wrapper: Path,
        target: str = "",
        program: str = "sysbench",
        scripts: dict[str, list[str]] | None = None,
    ):
        self.section = clients_section
        # The user's own sysbench scripts its levels run, each with its modules (the .lua files
        # of its directory: suites.workloads.sysbench.scripts.modules): copied there, each script into a
        # directory of its own.
        self.scripts = dict(scripts or {})
        self.script_paths: dict[str, str] = {}  # our path -> its path on the host
        # What runs there: "sysbench", or "python" (our own load clients: iibench), which needs
        # mallocsweep installed there, the same code as ours (suites.workloads.level_agent).
        self.program = program
        self.python = clients_section.python or "python3"
        self.target = target or clients_section.hosts[0]
        self.address = clients_section.server_address
        self.max_threads = max_threads
        self.wrapper = Path(wrapper)
        self.host = SshHost(
            self.target, clients_section.ssh_config, clients_section.connect_timeout_s
        )
        self.dir: str | None = None
        self.sysbench = ""
        self.facts: dict = {}
        self._levels = 0
        self.last_tag = ""

    # -- preflight -----------------------------------------------------------------------------
    def open(self) -> dict:
        """Log in and check the host; SuiteError naming it and what is missing. Returns the
        manifest's record of the client host."""
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        return self.to_manifest()

    def _open(self) -> None:
        t = self.target
        self.host.open()
        if self.program == "python":
            version = self._check_python()
        else:
            where = self.host.run("command -v sysbench")
            self.sysbench = where.stdout.decode(errors="replace").strip()
            if where.returncode != 0 or not self.sysbench:
                raise SuiteError(f"client host {t}: sysbench is not installed (not on PATH)")
            version = self.host.text(f"{shlex.quote(self.sysbench)} --version").strip()
        need = self.max_threads + NOFILE_MARGIN
        hard = self.host.text("ulimit -Hn").strip()
        if hard != "unlimited" and (not hard.isdigit() or int(hard) < need):
            raise SuiteError(
                f"client host {t}: open-file hard limit {hard} is below the {need} that "
                f"{self.max_threads} connections need (raise nofile for this user there)"
            )
        self._check_reachable()
        facts = self.host.text("getconf CLK_TCK; nproc").split()
        self.dir = self.host.text("mktemp -d /tmp/mallocsweep-client.XXXXXX").strip()
        up = self.host.run(
            f"cat > {shlex.quote(self.dir)}/mallocsweep.lua", input=self.wrapper.read_bytes()
        )
        if up.returncode != 0:
            raise SuiteError(f"client host {t}: cannot copy the sysbench wrapper to {self.dir}")
        for i, (script, files) in enumerate(self.scripts.items()):
            self.script_paths[script] = self._put_script(i, Path(script), files)
        self.facts = {
            "program": self.program,
            **(
                {"python": self.python, "mallocsweep": version}
                if self.program == "python"
                else {"sysbench": self.sysbench, "sysbench_version": version}
            ),
            "nofile_hard": hard,
            "nofile_needed": need,
            "clk_tck": int(facts[0]),
            "cpus": int(facts[1]),
            "work_dir": self.dir,
            "clock_at_start": clock.measure_offset(self.host),
        }

    def _check_python(self) -> dict:
        """mallocsweep's Python on the host runs the same code as ours (version and digest of the
        load clients' sources): a level there must be the level we would run here."""

        ours = identity()
        r = self.host.run(f"{shlex.quote(self.python)} -m suites.workloads.level_agent --version")
        out = r.stdout.decode(errors="replace").strip()
        try:
            theirs = json.loads(out.splitlines()[-1]) if r.returncode == 0 and out else None
        except json.JSONDecodeError:
            theirs = None
        if not isinstance(theirs, dict):
            err = r.stderr.decode(errors="replace").strip().splitlines()
            raise SuiteError(
                f"client host {self.target}: mallocsweep is not installed for {self.python} "
                f"there (clients.python): {err[-1] if err else 'no answer'}"
            )
        for key in ("version", "digest"):
            if theirs.get(key) != ours[key]:
                raise SuiteError(
                    f"client host {self.target}: its mallocsweep ({self.python}) is {key} "
                    f"{theirs.get(key)}, ours is {ours[key]}: install the same one there"
                )
        return theirs

    @property
    def hosts(self) -> list[RemoteClients]:
        """The client hosts a level's threads run on: this one (suites.remote.hosts.ClientHosts
        has several)."""
        return [self]

    def _put_script(self, i: int, script: Path, files: list[str]) -> str:
        """A user's script and its modules in a directory of their own there; its path there."""
        where = f"{self.dir}/script{i}"
        self.host.text(f"mkdir {shlex.quote(where)}")
        for f in map(Path, files):
            to = f"{shlex.quote(where)}/{shlex.quote(f.name)}"
            r = self.host.run(f"cat > {to}", input=f.read_bytes())
            if r.returncode != 0:
                raise SuiteError(f"client host {self.target}: cannot copy {f} to {where}")
        return f"{where}/{script.name}"

    def put(self, name: str, data: bytes) -> str:
        """A private file (mode 600) in our directory on the host; its path there."""
        path = f"{self.dir}/{name}"
        r = self.host.run(f"umask 077; cat > {shlex.quote(path)}", input=data)
        if r.returncode != 0:
            raise SuiteError(f"client host {self.target}: cannot write {path}")
        return path

    def new_tag(self) -> str:
        """A name for the next level's files on the host."""
        self._levels += 1
        return f"level{self._levels}"

    def python_command(self, args: list[str], tag: str) -> list[str]:
        """The ssh argv running our Python (mallocsweep's install there) with `args`, in its own
        process group on the host (killed by abort(tag)); its stdout is the records stream."""
        d = self.dir
        env = {"PATH": _PATH, "LC_ALL": "C", "HOME": d, "PYTHONDONTWRITEBYTECODE": "1"}
        line = (
            f"cd {shlex.quote(d)} || exit 1; env -i "
            + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            + " setsid "
            + " ".join(shlex.quote(a) for a in [self.python, *args])
            + f" & echo $! > {tag}.pid; wait $!"
        )
        self.last_tag = tag
        return self.host.argv(line)

    def _check_reachable(self) -> None:
        """The client host reaches this machine's server_address over TCP (the server's port is
        not known yet: a listener of ours on the same address stands in for it)."""
        s, (thread, seen) = _reachability_listener(self.address)
        port = s.getsockname()[1]
        try:
            probe = self.host.run(
                f"timeout 10 bash -c 'exec 3<>/dev/tcp/{self.address}/{port}'", timeout_s=20
            )
            if probe.returncode == 0:  # connected: the listener has it or is about to
                thread.join(15)
        finally:
            s.close()
        if probe.returncode != 0 or not seen:
            err = probe.stderr.decode(errors="replace").strip().splitlines()
            raise SuiteError(
                f"client host {self.target}: cannot reach {self.address} over TCP "
                f"({err[-1] if err else 'no connection arrived'})"
            )

    def to_manifest(self) -> dict:
        return {"host": self.target, "server_address": self.address} | self.facts

    # -- levels --------------------------------------------------------------------------------
    def load(self) -> dict:
        """The host's counters now (hostload.parse)."""
        return hostload.parse(self.host.text(hostload.COMMAND))

    def level_load(self, before: dict) -> dict:
        """The client_* columns of the level that just ran (`before`: load() before it)."""
        out = hostload.delta(self.target, before, self.load(), self.facts["clk_tck"])
        r = self.host.run(f"cat {shlex.quote(self.dir)}/{self.last_tag}.times 2>/dev/null")
        out.update(hostload.sysbench_cpu(r.stdout.decode(errors="replace")))
        return out

    def level_command(
        self, argv: list[str], env: dict, limit_s: float, barrier: bool = False
    ) -> tuple[list[str], str]:
        """The ssh argv running one level (argv/env as for a local sysbench: argv[1] is our
        wrapper), and the tag its files have on the host.

        `barrier`: the host's shell, once logged in, writes a "ready" record and waits for a line
        on its stdin (the go the runner sends every host at once, suites.workloads.sysbench.split), then
        writes a "start" record with its clock and starts sysbench: levels split over several
        hosts start together, and the skew they really had can be measured."""
        self._levels += 1
        tag = f"level{self._levels}"
        d = self.dir
        remote_env = {
            "PATH": _PATH,
            "LC_ALL": "C",
            "HOME": d,
            "MALLOCSWEEP_OUT": "/dev/fd/3",
            "MALLOCSWEEP_DONE": f"{d}/{tag}.done",
            "MALLOCSWEEP_THREADS": env["MALLOCSWEEP_THREADS"],
        }
        if "MALLOCSWEEP_SCRIPT" in env:  # the user's own script: its copy there
            remote_env["MALLOCSWEEP_SCRIPT"] = self.script_paths[env["MALLOCSWEEP_SCRIPT"]]
        else:
            remote_env["MALLOCSWEEP_WORKLOAD"] = env["MALLOCSWEEP_WORKLOAD"]
        args = [self.sysbench, f"{d}/mallocsweep.lua", *argv[2:]]
        nofile = self.max_threads + NOFILE_MARGIN
        # sysbench runs in the background of the remote shell so that, once it has been waited
        # for, `times` can report its CPU (the shell's children: timeout and sysbench).
        line = (
            f"ulimit -n {nofile} 2>/dev/null; cd {shlex.quote(d)} || exit 1; exec 3>&1 1>&2; "
            + (_BARRIER if barrier else "")
            + "env -i "
            + " ".join(f"{k}={shlex.quote(v)}" for k, v in remote_env.items())
            + f" timeout -s KILL {int(limit_s) + 10} "
            + " ".join(shlex.quote(a) for a in args)
            + f" & echo $! > {tag}.pid; wait $!; rc=$?; times > {tag}.times; exit $rc"
        )
        self.last_tag = tag
        return self.host.argv(line), tag

    def abort(self, tag: str) -> None:
        """End a level's sysbench on the host (its whole process group). Never raises: it runs
        on the way out of a level; an unreachable host ends it by itself (`timeout`)."""
        try:
            self.host.run(
                f"kill -KILL -- -$(cat {shlex.quote(self.dir)}/{tag}.pid) 2>/dev/null; true",
                timeout_s=15,
            )
        except SuiteError:
            pass

    def close(self) -> dict | None:
        """Remove our directory on the host and end the connection; the clock offset at the end
        (drift over the run) when it could still be read."""
        end = None
        try:
            if self.host.master is not None and "clock_at_start" in self.facts:
                try:
                    end = clock.measure_offset(self.host)
                    self.facts["clock_at_end"] = end
                except SuiteError:
                    pass
            if self.host.master is not None and self.dir:
                try:
                    self.host.run(f"rm -rf {shlex.quote(self.dir)}", timeout_s=15)
                except SuiteError:
                    pass
        finally:  # even when interrupted here: the connection and its socket go
            self.host.close()
        return end
