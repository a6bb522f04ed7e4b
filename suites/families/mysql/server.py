"""A MySQL-family server's life: datadir, start under an allocator, proof, queries, stop.

The server binary is our direct child (servers.launch.spawn, never mysqld_safe): its environment
is exactly the allocator's, collectors attach before its first instruction, and os.wait4 gives its
whole-life rusage. Everything it writes lives in the work directory: datadir/, my.cnf, error.log,
the pid file and (when the path is short enough) the unix socket.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import mysql.connector

from rundir.format import MARKER_TEXT, OWNER_MARKER
from servers import interrupts
from servers.allocators import Allocator
from servers.errors import ServerError
from servers.launch import Child, spawn
from servers.life import BASE_ENV, Launch, Probe, ServerLife, tail
from servers.root import RootLaunch, mount_points, remove_mount_points, rooted
from servers.scratch import owned_dir
from servers.verify import refuse_self_allocating, verify_allocator
from suites.families.mysql.flavor import ServerBinary, find_mysql
from suites.families.mysql.my_cnf import (
    MySQLSettings,
    ServerPaths,
    performance_schema,
    render_my_cnf,
)

__all__ = ["MySQLServer", "MySQLSettings", "ServerBinary", "find_mysql"]

SOCKET_MAX = 107  # sun_path is 108 bytes including the terminating NUL
# The server's own settings that change throughput or memory and whose defaults differ between
# versions and flavors (InnoDB's redo and flushing, the thread and table caches, per-session
# buffers, the query cache, performance_schema...): read once per life after the proof and kept
# in the cell's record (cells[].server.variables), so a run of two servers can say which of them
# differed besides the version (analysis/upgrade.py). A name the server lacks is left out.
RECORDED_VARIABLES = (
    "innodb_adaptive_hash_index",
    "innodb_buffer_pool_chunk_size",
    "innodb_buffer_pool_instances",
    "innodb_change_buffering",
    "innodb_doublewrite",
    "innodb_flush_log_at_trx_commit",
    "innodb_flush_method",
    "innodb_io_capacity",
    "innodb_log_buffer_size",
    "innodb_log_file_size",
    "innodb_page_size",
    "innodb_purge_threads",
    "innodb_read_io_threads",
    "innodb_write_io_threads",
    "innodb_stats_persistent",
    "innodb_thread_concurrency",
    "innodb_use_native_aio",
    "innodb_default_row_format",
    "join_buffer_size",
    "key_buffer_size",
    "large_pages",
    "log_bin",
    "max_heap_table_size",
    "performance_schema",
    "query_cache_size",
    "query_cache_type",
    "read_buffer_size",
    "read_rnd_buffer_size",
    "sort_buffer_size",
    "sync_binlog",
    "table_definition_cache",
    "table_open_cache",
    "table_open_cache_instances",
    "thread_handling",
    "thread_pool_size",
    "thread_stack",
    "tmp_table_size",
    "transaction_isolation",
    "tx_isolation",
    "character_set_server",
    "collation_server",
    "version_malloc_library",
)
# MySQL's own account of its memory (sys.memory_global_total without the sys schema): every
# memory instrument's current bytes. In the status under this name (not a status variable).
PFS_MEMORY = "performance_schema.memory_total_bytes"
PFS_MEMORY_QUERY = (
    "SELECT SUM(CURRENT_NUMBER_OF_BYTES_USED) "
    "FROM performance_schema.memory_summary_global_by_event_name"
)


def _error_lines(path: Path, n: int = 3) -> str:
    """The log's last [ERROR] lines as one line ('' when it has none)."""
    lines = tail(path, 200, missing="").splitlines()
    errors = [
        ln
        for ln in lines
        if ("[ERROR]" in ln or "ERROR:" in ln or "unknown variable" in ln or "unknown option" in ln)
        and not ln.rstrip().endswith("Aborting")  # says nothing about why
    ]
    return " | ".join(errors[-n:])


def _log_lines(path: Path, n: int = 3) -> str:
    """The error log's last [ERROR] lines (else its last lines) as one line, for an error message."""
    lines = tail(path, 200, missing="(no error log)").splitlines()
    return _error_lines(path, n) or " | ".join(lines[-n:])


class MySQLServer(ServerLife):
    """One server life in `workdir`. Use as a context manager to guarantee it is stopped."""

    def __init__(
        self,
        binary: ServerBinary,
        workdir: Path,
        settings: MySQLSettings,
        allocator: Allocator,
        port: int | None = None,
        thp_disable: bool = False,
        extra_preload: tuple[str, ...] = (),
        bind_address: str = "127.0.0.1",
        late_preload: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
        first_preload: tuple[str, ...] = (),
    ):
        self.binary = binary
        # The one address the server listens on: loopback, or the one a client host connects to.
        self.bind_address = bind_address
        # Non-allocator libraries preloaded before the allocator (the keep_thp experiment shim).
        self.extra_preload = tuple(extra_preload)
        # Libraries preloaded after the allocator, and their environment (the alloc_stats shim,
        # servers.allocstats): they interpose nothing. In a root they must live in the work dir.
        self.late_preload = tuple(late_preload)
        # Preloaded before everything else, from the work dir (the exposure counter,
        # servers.alloccount): it interposes the malloc family and forwards to the allocator.
        self.first_preload = tuple(first_preload)
        self.extra_env = dict(extra_env or {})
        self.workdir = Path(workdir).absolute()
        self.settings = settings
        self.allocator = allocator
        self.recorded_variables: dict[str, str] | None = None  # RECORDED_VARIABLES, once it answers
        self.requested_port = port
        self.port: int | None = port
        self.thp_disable = thp_disable
        self.datadir = self.workdir / "datadir"
        self.my_cnf = self.workdir / "my.cnf"
        self.error_log = self.workdir / "error.log"
        self.pid_file = self.workdir / "mysqld.pid"
        self.tmpdir = self.workdir / "tmp"
        # MySQL 8.0.40+/9.x will not start unless secure_file_priv names an existing directory:
        # an empty one of ours, so LOAD DATA/SELECT INTO OUTFILE cannot reach anything else.
        self.secure_file_priv = self.workdir / "secure-file-priv"
        self._mount_points: list[str] = []  # created in a server root for our binds (removed)
        self._socket_dir: Path | None = None  # a private /tmp dir when workdir is too deep
        local = self.workdir / "mysqld.sock"
        self._socket_local = len(str(local).encode()) <= SOCKET_MAX
        self.socket = local
        self.launch_env: dict[str, str] = {}
        self._status_conn = None
        self._status_lock = threading.Lock()

    # -- paths -------------------------------------------------------------------------------
    def _paths(self) -> ServerPaths:
        return ServerPaths(
            self.datadir,
            self.socket,
            self.pid_file,
            self.error_log,
            self.tmpdir,
            self.secure_file_priv,
        )

    # -- datadir -----------------------------------------------------------------------------
    def initialize(self, timeout_s: float = 600) -> None:
        """Create the datadir with the flavor's own tool; root has no password (socket only)."""
        if self.datadir.exists():
            # Even an empty directory may be someone's mount point or a path they prepared: only a
            # datadir carrying our marker (one we created, e.g. a failed initialise) is reused.
            if not (self.datadir / OWNER_MARKER).is_file():
                raise ServerError(
                    f"datadir {self.datadir} exists and was not created by mallocsweep "
                    f"(no {OWNER_MARKER}); refusing to touch it: choose a path that does not exist"
                )
            content = [p for p in self.datadir.iterdir() if p.name != OWNER_MARKER]
            if content:
                raise ServerError(
                    f"datadir {self.datadir} already holds data; start() it, or remove it first"
                )
        if self.binary.install_tool is None:
            raise ServerError(
                f"no mariadb-install-db found for {self.binary.path}; install mariadb-server "
                "or point at a complete install (basedir)"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.datadir.mkdir(exist_ok=True)
        (self.datadir / OWNER_MARKER).write_text(MARKER_TEXT)
        self.tmpdir.mkdir(exist_ok=True)
        self.secure_file_priv.mkdir(exist_ok=True)
        self._write_config(self.port or 0)
        log = self.workdir / "initialize.log"
        cnf = f"--defaults-file={self.my_cnf}"
        if self.binary.flavor == "mariadb":
            argv = [
                self.binary.install_tool,
                cnf,
                f"--basedir={self.binary.basedir}",
                f"--datadir={self.datadir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ]
            if self.binary.root is not None:
                # A bare root has no /etc/hosts, so the script's check that `uname -n` or
                # localhost resolves fails; --force skips only that check (we never resolve
                # names: skip-name-resolve, root over the socket).
                argv.append("--force")
        else:
            # --initialize-insecure wants an empty datadir: the marker goes back in afterwards.
            (self.datadir / OWNER_MARKER).unlink()
            argv = [self.binary.path, cnf, "--initialize-insecure", f"--datadir={self.datadir}"]
        env = dict(BASE_ENV)
        tool = argv[0]  # as messages name it (inside the root, for a server in one)
        root = self._in_root() if self.binary.root is not None else None
        try:
            child = spawn(argv, env=env, cwd=self.workdir, stdout=log, stderr=log, root=root)
            done = _wait_interruptibly(child, timeout_s)
            if done is None:
                child.terminate(term_timeout=10)
                raise ServerError(f"{tool} did not finish in {timeout_s:.0f}s; see {log}")
        except OSError as e:
            raise ServerError(f"cannot run {argv[0]}: {e.strerror}") from None
        finally:
            (self.datadir / OWNER_MARKER).write_text(MARKER_TEXT)
            self._remove_mount_points()
        if done.returncode != 0:
            raise ServerError(
                f"{Path(tool).name} failed ({done.describe}) for {self.datadir}: "
                # the bootstrap server writes its reasons to the error log (log-error), the
                # script only says where to look
                + (
                    f"{self.error_log}: {errors}"
                    if (errors := _error_lines(self.error_log))
                    else f"{log}: {_log_lines(log)}"
                )
            )

    def _write_config(self, port: int) -> None:
        text = render_my_cnf(
            self.binary, self.settings, self._paths(), port, bind_address=self.bind_address
        )
        self.my_cnf.write_text(text)

    # -- in a server root (servers.root) -------------------------------------------------------
    def _binds(self) -> list[str]:
        """Host directories the server must see, at the same paths: the work dir (datadir, my.cnf,
        logs, tmp, socket) and the short socket directory when the work dir is too deep."""
        binds = [str(self.workdir)]
        if self._socket_dir is not None:
            binds.append(str(self._socket_dir))
        return binds

    def _in_root(self) -> RootLaunch:
        """How a child runs in the server's root (paths inside it are the host's: bound)."""
        root = self.binary.root.path
        binds = self._binds()
        self._mount_points += mount_points(root, binds)
        return rooted(root, binds)

    def client_launch(self) -> RootLaunch | None:
        """How one of the server's own client programs (its dump client) runs beside it: in the
        server's root under chroot, seeing the work dir and socket at the same paths; None for a
        server on the host (the program runs there as it is)."""
        return self._in_root() if self.binary.root is not None else None

    def _remove_mount_points(self) -> None:
        if self.binary.root is not None and self._mount_points:
            remove_mount_points(self.binary.root.path, self._mount_points)
            self._mount_points = []

    # -- start (servers.life runs it) ---------------------------------------------------------
    def _prepare_launch(self) -> Launch:
        if self.binary.root is not None and self.extra_preload:
            raise ServerError(
                "a preload shim (keep_server_thp) is a host library; it cannot run in a server root"
            )
        refuse_self_allocating(Path(self.binary.host_path), self.allocator)
        if not (self.datadir / "mysql").is_dir():
            raise ServerError(
                f"datadir {self.datadir} is not initialised (no mysql/ schema); initialize() first"
            )
        self._claim_port(self.bind_address)
        self._prepare_socket()
        self.tmpdir.mkdir(exist_ok=True)
        self.secure_file_priv.mkdir(exist_ok=True)
        self._write_config(self.port)
        self.launch_env = self.allocator.launch_env(
            BASE_ENV | {"HOME": str(self.workdir), "TMPDIR": str(self.tmpdir)}
        )
        if self.binary.root is not None:
            outside = [
                p
                for p in (*self.first_preload, *self.late_preload)
                if not Path(p).is_relative_to(self.workdir)
            ]
            if outside:
                raise ServerError(
                    f"{outside[0]}: a library preloaded in a server root must be in the work dir"
                )
        if self.first_preload or self.extra_preload or self.late_preload:
            preload = [
                *(self._in_workdir(p) for p in self.first_preload),
                *self.extra_preload,
                self.launch_env.get("LD_PRELOAD", ""),
                *(self._in_workdir(p) for p in self.late_preload),
            ]
            self.launch_env["LD_PRELOAD"] = " ".join(p for p in preload if p)
            # ld.so splits LD_PRELOAD at spaces and colons, with no escape: such a path would be
            # dropped with a warning in the error log, and the shim silently missing.
            bad = [p for p in preload if p and (" " in p or ":" in p)]
            if bad:
                raise ServerError(f"{bad[0]}: LD_PRELOAD cannot name a path with a space or colon")
        self.launch_env.update(self.extra_env)
        argv = [self.binary.path, f"--defaults-file={self.my_cnf}"]
        # In a root, LD_PRELOAD (a path inside it) is set by the exec helper after the chroot.
        root = self._in_root() if self.binary.root is not None else None
        return Launch(argv, log=self.error_log, root=root)

    def _in_workdir(self, path: str) -> str:
        """A late preload in the work dir, named relative to it: the server starts there (on the
        host and in a root alike), and "./NAME" holds none of the spaces or colons the path of
        the user's --out may hold."""
        p = Path(path)
        return f"./{p.relative_to(self.workdir)}" if p.is_relative_to(self.workdir) else path

    def _prepare_socket(self) -> None:
        if not self._socket_local:
            # The work dir is too deep for sun_path: a short private dir, removed on stop.
            self._socket_dir = owned_dir("ms-sock-")
            self.socket = self._socket_dir / "mysqld.sock"
        elif self.socket.exists():
            # A socket left by a crashed server of ours; a live one would have failed port_in_use.
            self.socket.unlink()

    @contextmanager
    def _readiness_probe(self) -> Iterator[Probe]:
        def probe() -> str | None:
            if not self.socket.exists():
                return "no socket yet"
            try:
                self.connect(connect_timeout=5).close()
            except mysql.connector.Error as e:
                return str(e)
            return None

        yield probe

    def _not_ready_text(self, timeout_s: float, why: str) -> str:
        return f"did not accept connections within {timeout_s:.0f}s ({why})"

    def _log_summary(self) -> str:
        return _log_lines(self.error_log)

    def _prove(self) -> None:
        self.evidence = verify_allocator(
            self.child.pid,
            self.allocator,
            Path(self.binary.path),
            server_reported=self._malloc_library(),
        )
        self.recorded_variables = self._recorded_variables()

    def _recorded_variables(self) -> dict[str, str] | None:
        """RECORDED_VARIABLES as this server has them; None when they could not be read (the
        record then says nothing, the cell goes on: they describe the server, they prove nothing)."""
        try:
            return self.variables(RECORDED_VARIABLES)
        except (mysql.connector.Error, ServerError, OSError):
            return None

    def _malloc_library(self) -> str | None:
        """What the server says serves malloc (MariaDB only); None where it has no such report."""
        if self.binary.flavor != "mariadb":
            return None
        got = self.variables(["version_malloc_library"])
        return got.get("version_malloc_library")

    # -- talking to it -----------------------------------------------------------------------
    def connect(self, database: str | None = None, connect_timeout: int = 10):
        """A new mysql-connector connection as root over the unix socket (caller closes it)."""
        kwargs = dict(
            unix_socket=str(self.socket),
            user="root",
            password="",
            connection_timeout=connect_timeout,
            autocommit=True,
        )
        if database:
            kwargs["database"] = database
        return mysql.connector.connect(**kwargs)

    def client_target(self, database: str | None = None) -> dict:
        """Where clients connect (the runner turns this into a suites.target.ClientTarget)."""
        d = {
            "socket": str(self.socket),
            "port": self.port,
            "host": self.bind_address,
            "user": "root",
            "password": "",
        }
        if database:
            d["database"] = database
        return d

    def _query(self, sql: str) -> list[tuple]:
        conn = self.connect()
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return list(cur.fetchall())
        finally:
            conn.close()

    def variables(self, names: Iterable[str]) -> dict[str, str]:
        """Global variables by name (missing ones are left out)."""
        names = [n for n in names]
        for n in names:
            if not n.replace("_", "").isalnum():
                raise ServerError(f"not a server variable name: {n!r}")
        if not names:
            return {}
        quoted = ",".join(f"'{n}'" for n in names)
        rows = self._query(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({quoted})")
        return {str(k).lower(): _text(v) for k, v in rows}

    def global_status(self, only: tuple[str, ...] = ()) -> dict[str, float]:
        """SHOW GLOBAL STATUS, numeric values only (`only`: just those variables). One kept
        connection (callable from a collector thread) so polling does not inflate
        Connections/Threads_created."""
        query = "SHOW GLOBAL STATUS"
        if only:
            query += " WHERE Variable_name IN (" + ",".join(f"'{n}'" for n in only) + ")"
        with self._status_lock:
            for attempt in (1, 2):
                try:
                    if self._status_conn is None or not self._status_conn.is_connected():
                        self._status_conn = self.connect()
                    cur = self._status_conn.cursor()
                    cur.execute(query)
                    rows = cur.fetchall()
                    if not only and self.pfs_memory:
                        cur.execute(PFS_MEMORY_QUERY)
                        rows.append((PFS_MEMORY, (cur.fetchone() or (None,))[0]))
                    cur.close()
                    break
                except mysql.connector.Error as e:
                    self._close_status()
                    if attempt == 2 or not self.alive:
                        raise ServerError(
                            f"SHOW GLOBAL STATUS failed on {self.socket}: {e}"
                        ) from None
        out: dict[str, float] = {}
        for name, value in rows:
            try:
                out[str(name)] = float(_text(value))
            except (TypeError, ValueError):
                continue
        return out

    @property
    def pfs_memory(self) -> bool:
        """Whether its status carries performance_schema's memory total (PFS_MEMORY): MySQL and
        Percona with performance_schema on (MariaDB says Memory_used itself)."""
        return self.binary.flavor != "mariadb" and performance_schema(self.binary, self.settings)

    def connection_status(self) -> dict[str, float]:
        """Threads_connected alone, for a read while the load runs: the whole SHOW GLOBAL STATUS
        took the server 85 ms here with no client connected (it sums every connection's
        counters), the single variable about 1 ms (issue 19)."""
        return self.global_status(("Threads_connected",))

    def _close_status(self) -> None:
        conn, self._status_conn = self._status_conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a connection to a dying server
                pass

    # -- stop --------------------------------------------------------------------------------
    def _request_shutdown(self) -> bool:
        with self._status_lock:
            self._close_status()
        return self._sql_shutdown()

    def _release(self) -> None:
        with self._status_lock:
            self._close_status()
        # The binds died with the server's mount namespace; only our empty mount points remain.
        if self.child is None or self.child.exit is not None:
            self._remove_mount_points()
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def _sql_shutdown(self) -> bool:
        """Ask the server to shut down; True when the request reached it."""
        try:
            conn = self.connect(connect_timeout=5)
        except mysql.connector.Error:
            return False
        try:
            conn.cursor().execute("SHUTDOWN")
        except mysql.connector.Error:
            pass  # the server may drop the connection while answering
        finally:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - the server closes it on its way down
                pass
        return True

    def to_manifest(self) -> dict:
        return {
            "flavor": self.binary.flavor,
            "version": self.binary.version,
            "version_string": self.binary.version_string,
            "binary": self.binary.path,
            "sha256": getattr(self.binary, "sha256", None),
            "root": self.binary.root.to_manifest() if self.binary.root else None,
            "settings": self.settings.to_manifest(),
            "port": self.port,
            "bind_address": self.bind_address,
            "socket": str(self.socket),
            "pid": self.pid,
            "thp_disable": self.thp_disable,
            "extra_preload": list(self.extra_preload),
            "late_preload": list(self.late_preload),
            "first_preload": list(self.first_preload),
            "allocator": self.allocator.name,
            "variables": self.recorded_variables,
            "launch_env": {k: v for k, v in self.launch_env.items() if k not in ("HOME", "TMPDIR")},
            "evidence": self.evidence,
            "exit": self.exit.to_manifest() if self.exit else None,
        }


def _wait_interruptibly(child: Child, timeout_s: float):
    """child.wait(timeout_s) with safe points: on a signal the child is stopped, then
    Interrupted is raised."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = child.wait(min(0.5, max(0.0, deadline - time.monotonic())))
        if done is not None or time.monotonic() >= deadline:
            return done
        try:
            interrupts.check()
        except interrupts.Interrupted:
            with interrupts.held():
                child.terminate(term_timeout=10)
            raise


def _text(v) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes | bytearray) else str(v)
