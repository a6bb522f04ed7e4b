"""One OpenSSH connection to a client host, shared by every command of a run.

The master connection is our own child (`ssh -M -N`, killed with us), and every later command
goes through its control socket (ControlPath): one login per run, not one per level, and each
command costs a round trip instead of a key exchange. BatchMode: a host that asks for a password
or a new host key fails at once instead of hanging a benchmark on a prompt. Nothing of the user's
SSH setup is changed; an ssh_config file may be named (ssh -F).
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from servers.launch import Child, spawn
from servers.scratch import owned_dir
from suites.errors import SuiteError

SSH = "ssh"
# What ssh itself needs from our environment: HOME for ~/.ssh, an agent if the user has one.
_ENV_KEYS = ("HOME", "USER", "LOGNAME", "SSH_AUTH_SOCK", "PATH")
_WHY = (
    ("Permission denied", "the key was refused"),
    ("Host key verification failed", "its host key is unknown or changed (known_hosts)"),
    ("Connection timed out", "it does not answer"),
    ("No route to host", "it does not answer (no route)"),
    ("Connection refused", "nothing listens on its SSH port"),
    ("Could not resolve hostname", "its name does not resolve"),
    ("Operation timed out", "it does not answer"),
)


def explain(stderr: str) -> str:
    """ssh's last error line, with what it means for the user."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    last = lines[-1] if lines else "ssh exited without a message"
    for needle, why in _WHY:
        if any(needle in ln for ln in lines):
            return f"{why} ({last})"
    return last


class SshHost:
    """`target` ("user@host" or an ssh_config alias) reached over one shared connection."""

    def __init__(self, target: str, ssh_config: str = "", connect_timeout_s: float = 10):
        self.target = target
        self.ssh_config = ssh_config
        self.connect_timeout_s = connect_timeout_s
        self._dir = owned_dir("ms-ssh-", Path(tempfile.gettempdir()))
        self.control_path = self._dir / "cm"
        self.master: Child | None = None

    def options(self) -> list[str]:
        argv = [SSH]
        if self.ssh_config:
            argv += ["-F", self.ssh_config]
        return argv + [
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={max(1, math.ceil(self.connect_timeout_s))}",
            "-o",
            f"ControlPath={self.control_path}",
            # A host that stops answering mid-run ends our commands instead of hanging them.
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
        ]

    def argv(self, command: str) -> list[str]:
        """A command through the shared connection (never a login of its own)."""
        return [*self.options(), "-o", "ControlMaster=no", "-T", self.target, command]

    def env(self) -> dict:
        return {k: os.environ[k] for k in _ENV_KEYS if k in os.environ} | {"LC_ALL": "C"}

    def open(self) -> None:
        """Log in once; SuiteError naming the host and the reason when that fails."""
        log = self._dir / "master.log"
        argv = [*self.options(), "-o", "ControlMaster=yes", "-o", "ControlPersist=no", "-N", "-n"]
        self.master = spawn(
            [*argv, self.target],
            env=self.env(),
            stdout=log,
            stderr=log,
            death_signal=signal.SIGTERM,
        )
        deadline = time.monotonic() + self.connect_timeout_s + 10
        while True:
            ended = self.master.wait(0.05)
            if ended is not None:
                why = explain(log.read_text(errors="replace"))
                self.master = None
                raise SuiteError(f"client host {self.target}: ssh cannot log in: {why}")
            if self.control_path.exists() and self._check():
                return
            if time.monotonic() > deadline:
                self.close()
                raise SuiteError(
                    f"client host {self.target}: ssh did not log in within "
                    f"{self.connect_timeout_s + 10:.0f}s: it does not answer"
                )

    def _check(self) -> bool:
        r = subprocess.run(
            [*self.options(), "-O", "check", self.target],
            env=self.env(),
            capture_output=True,
            timeout=10,
        )
        return r.returncode == 0

    def run(
        self, command: str, input: bytes | None = None, timeout_s: float = 30
    ) -> subprocess.CompletedProcess:
        """`command` (a shell line) on the host; its exit status is the caller's to judge."""
        if self.master is None:
            raise SuiteError(f"client host {self.target}: not connected")
        try:
            return subprocess.run(
                self.argv(command),
                input=input,
                env=self.env(),
                capture_output=True,
                timeout=timeout_s,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise SuiteError(
                f"client host {self.target}: no answer within {timeout_s:.0f}s to {command[:40]!r}"
            ) from None

    def text(self, command: str, timeout_s: float = 30) -> str:
        """stdout of a command that must succeed."""
        r = self.run(command, timeout_s=timeout_s)
        if r.returncode != 0:
            err = r.stderr.decode(errors="replace").strip().splitlines()
            raise SuiteError(
                f"client host {self.target}: {command.split()[0]} failed "
                f"(exit {r.returncode}): {err[-1] if err else 'no message'}"
            )
        return r.stdout.decode(errors="replace")

    def close(self) -> None:
        """End the shared connection and remove its socket; safe to call twice."""
        if self.master is not None:
            if self.control_path.exists():
                subprocess.run(
                    [*self.options(), "-O", "exit", self.target],
                    env=self.env(),
                    capture_output=True,
                    timeout=10,
                )
            if self.master.wait(5) is None:
                self.master.terminate(term_timeout=5)
            self.master = None
        shutil.rmtree(self._dir, ignore_errors=True)
