"""A server family is a plugin: one defined here, in this file only, runs a real mariadbd.

The stub family below owns everything a family owns — its [server] section, its config file, its
server life (launch, readiness, allocator proof, shutdown), its status counters by meaning, how
clients reach it and its driver — and shares no code with the MySQL family's plugin (it uses the
framework: servers.life, servers.verify, suites.families.base). Its server is a mariadbd, so its
driver speaks the MySQL protocol: it extends the MySQL family's driver (the protocol, not the
family) under a name of this file, which its targets carry, so the load clients in their own
processes load it from here. Nothing outside this file names it.
The first test drives it through the family interface alone: start, prove, read, stop. The second
registers it in a fresh interpreter and runs `mallocsweep run` on an iibench suite of flavor
"stubdb": the runner, the cell, the workload, the collectors, the raw record and the derivations
follow the family's declarations without knowing it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import mysql.connector
import pytest
from pydantic import Field

from servers.allocators import resolve
from servers.errors import ServerError
from servers.launch import spawn
from servers.life import Launch, Probe, ServerLife
from servers.verify import verify_allocator
from suites.config.sections import ServerSection
from suites.families.base import Family, ServerLaunch
from suites.families.mysql.driver import MySQLDriver
from suites.target import ClientTarget
from tests.integration.runs_helpers import scratch_dir

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


# -- the stub family ---------------------------------------------------------------------------


class StubSection(ServerSection):
    flavor: Literal["stubdb"] = Field("stubdb", description="The stub family of a test.")
    pool_mb: int = Field(32, ge=8, description="Its buffer pool, MiB.")


@dataclass(frozen=True)
class StubBinary:
    path: str
    version: str
    flavor: str = "stubdb"


class StubServer(ServerLife):
    """mariadbd with a config file of the stub's own, started as our child."""

    noun = "stub server"
    start_timeout_s = 120

    def __init__(self, binary: StubBinary, workdir: Path, allocator, pool_mb: int, thp_disable):
        self.binary, self.allocator, self.pool_mb = binary, allocator, pool_mb
        self.thp_disable = thp_disable
        self.workdir = Path(workdir).absolute()
        self.datadir = self.workdir / "data"
        self.cnf = self.workdir / "stub.cnf"
        self.error_log = self.workdir / "stub.err"
        self.sockdir = Path(tempfile.mkdtemp(prefix="ms-stub-"))
        self.socket = self.sockdir / "stub.sock"
        self.launch_env: dict[str, str] = {}

    def _write_cnf(self, port: int) -> None:
        self.cnf.write_text(
            "[mysqld]\n"
            + ("user = root\n" if os.geteuid() == 0 else "")
            + f"datadir = {self.datadir}\nsocket = {self.socket}\nport = {port}\n"
            f"bind-address = 127.0.0.1\nlog-error = {self.error_log}\n"
            f"pid-file = {self.workdir}/stub.pid\ninnodb_buffer_pool_size = {self.pool_mb}M\n"
            "innodb_buffer_pool_dump_at_shutdown = OFF\ninnodb_buffer_pool_load_at_startup = OFF\n"
            "skip-name-resolve\n"
        )

    def initialize(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_cnf(0)
        log = self.workdir / "install.log"
        argv = [shutil.which("mariadb-install-db", path=ENV["PATH"]), f"--defaults-file={self.cnf}",
                "--auth-root-authentication-method=normal", "--skip-test-db"]  # fmt: skip
        child = spawn(argv, env=ENV, cwd=self.workdir, stdout=log, stderr=log)
        done = child.wait(300)
        if done is None or done.returncode != 0:
            raise ServerError(f"stub: mariadb-install-db failed; see {log}")

    def _prepare_launch(self) -> Launch:
        if not (self.datadir / "mysql").is_dir():
            self.initialize()  # each life starts from a fresh datadir of its own
        self._claim_port()
        self._write_cnf(self.port)
        self.launch_env = self.allocator.launch_env(ENV | {"HOME": str(self.workdir)})
        return Launch([self.binary.path, f"--defaults-file={self.cnf}"], log=self.error_log)

    @contextmanager
    def _readiness_probe(self) -> Iterator[Probe]:
        def probe() -> str | None:
            try:
                self.connect().close()
            except mysql.connector.Error as e:
                return str(e)
            return None

        yield probe

    def _prove(self) -> None:
        self.evidence = verify_allocator(self.child.pid, self.allocator, Path(self.binary.path))

    def _request_shutdown(self) -> bool:
        try:
            conn = self.connect()
        except mysql.connector.Error:
            return False
        try:
            conn.cursor().execute("SHUTDOWN")
        except mysql.connector.Error:
            pass
        finally:
            conn.close()
        return True

    def _release(self) -> None:
        if self.child is None or self.child.exit is not None:
            shutil.rmtree(self.sockdir, ignore_errors=True)

    def connect(self):
        return mysql.connector.connect(
            unix_socket=str(self.socket), user="root", password="", connection_timeout=5,
            autocommit=True,
        )  # fmt: skip

    def status(self) -> dict[str, float]:
        conn = self.connect()
        try:
            cur = conn.cursor()
            cur.execute("SHOW GLOBAL STATUS")
            out = {}
            for name, value in cur.fetchall():
                try:
                    out[str(name)] = float(value)
                except (TypeError, ValueError):
                    continue
            return out
        finally:
            conn.close()

    def to_manifest(self) -> dict:
        return {
            "flavor": "stubdb", "version": self.binary.version, "binary": self.binary.path,
            "port": self.port, "pid": self.pid, "allocator": self.allocator.name,
            "launch_env": {k: v for k, v in self.launch_env.items() if k != "HOME"},
            "evidence": self.evidence, "exit": self.exit.to_manifest() if self.exit else None,
        }  # fmt: skip


class StubDriver(MySQLDriver):
    """The MySQL protocol, as this file's own driver (what its targets name)."""

    ref = f"{__name__}:STUB_DRIVER"


STUB_DRIVER = StubDriver()


class StubFamily(Family):
    name = "stubdb"
    flavors = ("stubdb",)
    section = StubSection
    summary = "a test's stub of MariaDB"
    driver = STUB_DRIVER

    def resolve(self, server):
        path = server.binary or shutil.which("mariadbd", path=ENV["PATH"])
        said = subprocess.run([path, "--version"], capture_output=True, text=True, env=ENV).stdout
        version = re.search(r"Ver\s+(\d+\.\d+\.\d+)", said).group(1)
        return StubBinary(path, version), f"stubdb-{version}"

    def cache_kb(self, server) -> int:
        return server.pool_mb * 1024

    def make_server(self, launch: ServerLaunch) -> StubServer:
        return StubServer(
            launch.binary, launch.workdir, launch.allocator, launch.server.pool_mb,
            launch.thp_disable,
        )  # fmt: skip

    def status(self, life: StubServer):
        return life.status

    def counters(self, engine: str = "innodb", binary=None) -> dict[str, str]:
        return {
            "threads_created": "Threads_created",
            "clients_connected": "Threads_connected",
            "memory_used_bytes": "Memory_used",
        }

    def target(self, life: StubServer, database: str) -> ClientTarget:
        return ClientTarget(
            driver_ref=self.driver.ref, socket=str(life.socket), port=life.port, database=database
        )

    def connect(self, life: StubServer):
        return life.connect


STUB = StubFamily()


def register() -> None:
    """The stub family in this interpreter's registry (before suites.suite.model builds the Suite)."""
    from suites.families import registry as families

    assert "suites.suite.model" not in sys.modules, "register before the Suite model is built"
    families.register(STUB)


# -- the tests -----------------------------------------------------------------------------------


def test_a_family_of_a_test_starts_proves_and_stops_a_real_mariadbd():
    binary, label = STUB.resolve(StubSection())
    assert label.startswith("stubdb-")
    jemalloc = resolve(["jemalloc"])[0]
    if not jemalloc.usable:
        pytest.skip(f"jemalloc not usable here: {jemalloc.why_not}")
    with scratch_dir("ms-stubfam-") as work:
        server = STUB.make_server(
            ServerLaunch(binary=binary, workdir=work / "life", server=StubSection(), allocator=jemalloc)
        )  # fmt: skip
        try:
            pid = server.start()
            # the allocator proof ran in the start: jemalloc is bound to malloc in mariadbd
            assert server.evidence["verdict"] == "verified", server.evidence
            assert server.evidence["pid"] == pid
            names = STUB.counters()
            status = STUB.status(server)()
            assert status[names["threads_created"]] >= 1 and status[names["memory_used_bytes"]] > 0
            conn = STUB.connect(server)()
            conn.close()
            # its clients reach it by its own driver, also from a target rebuilt from its fields
            # (as a load client's process does)
            target = STUB.target(server, "mysql")
            assert target.driver is STUB_DRIVER and STUB.mysql_compatible
            again = ClientTarget(**dataclasses.asdict(target))
            assert again.driver is STUB_DRIVER
            conn = again.driver.connect(again)
            try:
                cur = conn.cursor()
                cur.execute("SELECT 1")
                assert cur.fetchall() == ((1,),)
            finally:
                conn.close()
        finally:
            exit_info = server.stop()
        assert exit_info is not None and exit_info.returncode == 0 and not server.alive
        assert exit_info.rusage["ru_utime"] > 0  # reaped by us: wait4's whole-life totals


_RUN = """
import sys
sys.path.insert(0, {repo!r})
from tests.integration import test_family_plugin as stub
stub.register()
from suites.cli.main import main
raise SystemExit(main(["run", {suite!r}, "--out", {out!r}, "--quiet"]))
"""


def test_the_runner_runs_a_family_it_does_not_know(tmp_path):
    suite = tmp_path / "stub.toml"
    # iibench, a workload that has never heard of the stub: 4 insert clients, each its own
    # connection, on the stub's server
    suite.write_text(
        '[suite]\nname = "stub"\nkind = "iibench"\n[server]\nflavor = "stubdb"\npool_mb = 16\n'
        '[allocators]\nuse = ["glibc", "jemalloc"]\n'
        "[iibench]\nclients = 4\nmax_rows = 20000\nbatch_rows = 100\nsecondary_indexes = 1\n"
        "[memory]\nalloc_stats = false\n"
    )
    out = tmp_path / "runs"
    done = subprocess.run(
        [sys.executable, "-c", _RUN.format(repo=str(REPO), suite=str(suite), out=str(out))],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = out.iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["suite"]["server"]["flavor"] == "stubdb"
    assert [c["status"] for c in manifest["cells"]] == ["ok", "ok"]
    for cell in manifest["cells"]:
        assert cell["verification"]["verdict"] == "verified"
        assert cell["server"]["flavor"] == "stubdb"
        raw = json.loads((run / "raw" / f"{cell['id']}.json").read_text())
        assert raw["counters"] == STUB.counters()
        (level,) = raw["levels"]
        assert level["workload"] == "iibench" and level["status"] == "ok"
        assert level["report"]["events"] == 20000
        ph = raw["phases"][level["phase"]]
        created = ph["end"]["status"]["Threads_created"] - ph["start"]["status"]["Threads_created"]
        (row,) = json.loads((run / "cells" / f"{cell['id']}.json").read_text())["rows"]
        # the derivation read the stub's counters by their meaning: the clients made threads
        assert row["threads_created"] == created > 0
        assert row["server_memory_used_kb"] > 0 and row["window_s"] > 0
