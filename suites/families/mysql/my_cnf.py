"""The my.cnf a MySQL-family server runs with: sizing rules, flavor differences, suite extras.

The template (configs/mysql/my.cnf.template) holds the layout and the reasons; this module only
computes the values, so every figure in a run can be traced to one rendered file.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from string import Template

from servers.errors import ServerError
from servers.shipped import shipped
from suites.families.mysql.engines import engine_lines
from suites.families.mysql.flavor import ServerBinary
from suites.families.mysql.option_file import option_value

TEMPLATE = shipped("configs", "mysql", "my.cnf.template")

# Connections beyond the client threads: warmup scans, the status collector, our own control
# connection, sysbench's prepare. Too few and the largest level fails with "Too many connections".
CONNECTION_MARGIN = 64
# Prepared statements sysbench oltp_read_only keeps per thread (point/range/sum/order/distinct,
# begin/commit), with headroom: at 1536 threads the default 16382 is exhausted.
PREPARED_PER_THREAD = 16
# Settings the lifecycle depends on: a suite may not override them.
RESERVED = {
    "port",
    "socket",
    "bind_address",
    "datadir",
    "pid_file",
    "log_error",
    "user",
    "basedir",
    "tmpdir",
    "skip_networking",
    "skip_grant_tables",
}


# Settings the tool writes itself from what it records (the template's lines): the server would
# take the suite's value (it comes later in my.cnf) while the manifest and the report say ours.
# Each: what mallocsweep sets, and why the suite may not.
OWN_SETTINGS = {
    "malloc_lib": (
        "the allocator under test, preloaded from [allocators] or --allocators",
        "mysqld_safe's malloc-lib would load another allocator (and mysqld refuses the option)",
    ),
    "performance_schema": (
        "performance_schema = OFF (ON, its history tables sized 0, where [memory] reads MySQL's "
        "own memory account)",
        "the recorded memory and the server's account assume that setting",
    ),
    "innodb_buffer_pool_dump_at_shutdown": (
        "innodb_buffer_pool_dump_at_shutdown = OFF",
        "with it every allocator after the first would start with a warm buffer pool",
    ),
    "innodb_buffer_pool_load_at_startup": (
        "innodb_buffer_pool_load_at_startup = OFF",
        "with it every allocator after the first would start with a warm buffer pool",
    ),
    "innodb_log_file_size": (
        "the redo log size (256 MiB), which the disk preflight counts",
        "the preflight and the manifest would count another size",
    ),
    "innodb_redo_log_capacity": (
        "the redo log size (256 MiB), which the disk preflight counts",
        "the preflight and the manifest would count another size",
    ),
}


# Settings the template writes that a suite may choose: the suite's value is taken into
# MySQLSettings (one my.cnf line, and the manifest records what the server ran), never written
# a second time after ours. my.cnf name -> MySQLSettings field.
ADOPTED_SETTINGS = {"innodb_flush_log_at_trx_commit": "flush_log_at_trx_commit"}


def adopt(extra: dict) -> tuple[dict, dict]:
    """(the settings left for extra_lines, MySQLSettings fields taken from the others). ServerError
    naming the key for a value the field cannot hold."""
    rest, fields = {}, {}
    for key, value in extra.items():
        name = _norm(str(key)).removeprefix("loose_")
        field_name = ADOPTED_SETTINGS.get(name)
        if field_name is None:
            rest[key] = value
            continue
        text = str(value).strip()
        if isinstance(value, bool) or not (text.isascii() and text in ("0", "1", "2")):
            raise ServerError(f"server.settings: {key} = {value!r}: expected 0, 1 or 2")
        fields[field_name] = int(text)
    return rest, fields


def abbreviates(key: str) -> str | None:
    """The setting of ours a my.cnf key would abbreviate, or None. The server takes any
    unambiguous prefix of an option's name for the option (`bind = 0.0.0.0` sets bind_address),
    so a key that is a proper prefix of a name we set (or take from the suite) would override it
    unseen while the manifest says ours."""
    name = _norm(key).removeprefix("loose_")
    ours = sorted(RESERVED | set(OWN_SETTINGS) | set(ADOPTED_SETTINGS))
    for prefix in ("", "skip_", "enable_", "disable_"):
        base = name[len(prefix) :] if name.startswith(prefix) else None
        if base:
            for full in ours:
                if full != base and full.startswith(base):
                    return full
    return None


def own_setting(key: str) -> str | None:
    """The OWN_SETTINGS name a my.cnf key sets (loose-, skip-, enable-, disable- prefixes and - or
    _ spellings included), or None."""
    name = _norm(key).removeprefix("loose_")
    for prefix in ("", "skip_", "enable_", "disable_"):
        if name.startswith(prefix) and name[len(prefix) :] in OWN_SETTINGS:
            return name[len(prefix) :]
    return None


@dataclass
class MySQLSettings:
    """What a suite controls about the server. Defaults fit the 8 → 1536 thread sweep."""

    buffer_pool_mb: int = 256
    max_threads: int = 1536  # the largest client level
    innodb_log_file_mb: int = 256  # small enough to create fast, large enough not to stall OLTP_RO
    flush_log_at_trx_commit: int = 1
    performance_schema: bool = False
    table_open_cache: int | None = None  # None: sized from max_threads
    # Prepared statements the clients hold at once at the top level (sysbench OLTP_RO keeps
    # 2 + 5 x tables per thread: 33,792 at 1536 threads x 4 tables). 0 = per-thread default.
    prepared_statements: int = 0
    extra: dict[str, str] = field(default_factory=dict)  # raw [mysqld] lines from the suite
    # The storage engine of the workload's tables (suites.families.mysql.engines) and MyRocks' own memory.
    engine: str = "innodb"
    rocksdb_block_cache_mb: int = 256
    rocksdb_write_buffer_mb: int = 64
    # Who holds the memory (collectors/smaps.py): MySQL and Percona mark their buffer pool
    # don't-dump (so its mapping can be told from the heap) only with core-file on and
    # innodb_buffer_pool_in_core_file OFF; MariaDB does it by default.
    mark_buffer_pool: bool = False
    # The server's own account of its memory: MariaDB has Memory_used; MySQL and Percona only
    # performance_schema's memory instruments, so it is turned on for them, its history and
    # digest tables sized 0 (measured on MySQL 9.7.4 here, 128 MiB pool, 64 connections: RSS at
    # start 295 MB without performance_schema, 538 MB with its defaults, 377 MB so).
    memory_account: bool = False

    def __post_init__(self):
        for name in ("buffer_pool_mb", "max_threads", "innodb_log_file_mb"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ServerError(f"server setting {name} must be a positive integer, got {v!r}")
        if self.flush_log_at_trx_commit not in (0, 1, 2):
            raise ServerError(
                f"server setting flush_log_at_trx_commit must be 0, 1 or 2, got {self.flush_log_at_trx_commit!r}"
            )

    # -- sizing for max_threads clients --------------------------------------------------------
    @property
    def max_connections(self) -> int:
        return self.max_threads + CONNECTION_MARGIN

    @property
    def thread_cache_size(self) -> int:
        return min(16384, self.max_connections)  # 16384 is the server's maximum

    @property
    def back_log(self) -> int:
        return min(65535, max(128, self.max_connections))

    @property
    def table_cache(self) -> int:
        return self.table_open_cache or max(2000, 2 * self.max_connections)

    @property
    def open_files_limit(self) -> int:
        # one descriptor per connection, two per cached table (data + index), plus InnoDB files
        return self.max_connections + 2 * self.table_cache + 1024

    @property
    def max_prepared_stmt_count(self) -> int:
        need = max(
            16382,
            PREPARED_PER_THREAD * self.max_connections,
            self.prepared_statements + self.prepared_statements // 10 + 1024,
        )
        return min(1048576, need)

    def to_manifest(self) -> dict:
        d = asdict(self)
        d.update(
            max_connections=self.max_connections,
            thread_cache_size=self.thread_cache_size,
            back_log=self.back_log,
            table_open_cache=self.table_cache,
            open_files_limit=self.open_files_limit,
            max_prepared_stmt_count=self.max_prepared_stmt_count,
        )
        return d


@dataclass(frozen=True)
class ServerPaths:
    datadir: Path
    socket: Path
    pid_file: Path
    error_log: Path
    tmpdir: Path
    secure_file_priv: Path | None = None  # an existing empty directory (MySQL/Percona)


def _norm(key: str) -> str:
    return key.strip().lower().replace("-", "_")


def extra_lines(extra: dict[str, str]) -> list[str]:
    """The suite's own [mysqld] lines; ServerError naming a key that is malformed or reserved."""
    lines = []
    for key, value in extra.items():
        k = str(key).strip()
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", k):
            raise ServerError(f"server.settings: {key!r} is not a my.cnf option name")
        if _norm(k) in RESERVED or _norm(k).removeprefix("loose_") in RESERVED:
            raise ServerError(
                f"server.settings: {k} is set by mallocsweep (private port, socket, dirs); remove it"
            )
        full = abbreviates(k)
        if full:
            raise ServerError(
                f"server.settings: {k} is an abbreviation the server reads as {full}, which "
                f"mallocsweep sets itself; write each option in full"
            )
        own = own_setting(k)
        if own:
            what, why = OWN_SETTINGS[own]
            raise ServerError(
                f"server.settings: {k} = {value!r} conflicts with what mallocsweep sets itself "
                f"({what}): {why}; remove it"
            )
        v = str(value)
        v = {"true": "ON", "false": "OFF"}.get(v.lower(), v)
        # A '#' or a backslash in a user's value is written so the server reads it unchanged.
        lines.append(k if v == "" else f"{k} = {option_value(v, f'the value of {k}')}")
    return lines


# performance_schema tables a memory account does not need, sized 0 (MySQL/Percona).
PFS_UNNEEDED = (
    "digests_size",
    "events_statements_history_long_size",
    "events_statements_history_size",
    "events_stages_history_long_size",
    "events_stages_history_size",
    "events_waits_history_long_size",
    "events_waits_history_size",
    "events_transactions_history_long_size",
    "events_transactions_history_size",
    "max_sql_text_length",
    "max_digest_length",
    "error_size",
    "session_connect_attrs_size",
    "accounts_size",
    "hosts_size",
    "users_size",
)


def memory_lines(binary: ServerBinary, settings: MySQLSettings | None) -> list[str]:
    """MySQL/Percona lines for the memory decomposition and the server's own account (see
    MySQLSettings.mark_buffer_pool, memory_account); MariaDB needs none."""
    if binary.flavor == "mariadb" or settings is None:
        return []
    lines = []
    if settings.mark_buffer_pool:
        lines += ["core-file", "innodb_buffer_pool_in_core_file = OFF"]
    if settings.memory_account:
        lines += [f"loose-performance_schema_{k} = 0" for k in PFS_UNNEEDED]
    return lines


def flavor_lines(
    binary: ServerBinary, paths: ServerPaths | None = None, settings: MySQLSettings | None = None
) -> list[str]:
    if binary.flavor == "mariadb":
        return []
    # MySQL 8 / Percona start the X Protocol plugin on port 33060 by default: a second server
    # on the machine would collide. 5.7 has no such plugin (loose_ ignores unknown options).
    lines = ["loose-mysqlx = OFF"]
    if paths is not None and paths.secure_file_priv is not None:
        # MySQL 9.7 refuses to start unless this names an existing directory (its default,
        # /var/lib/mysql-files, does not exist in a bare root or a tarball install).
        lines.append(
            f"secure-file-priv = {option_value(paths.secure_file_priv, 'secure-file-priv')}"
        )
    return lines + memory_lines(binary, settings)


def performance_schema(binary: ServerBinary, settings: MySQLSettings) -> bool:
    """On when the suite asks, or for MySQL/Percona's own memory account."""
    return settings.performance_schema or (settings.memory_account and binary.flavor != "mariadb")


def redo_line(binary: ServerBinary, log_mb: int) -> str:
    if binary.flavor != "mariadb" and binary.version_tuple() >= (8, 0, 30):
        # 8.0.30 replaced innodb_log_file_size/files_in_group by one capacity setting.
        return f"innodb_redo_log_capacity = {2 * log_mb}M"
    return f"innodb_log_file_size = {log_mb}M"


def render_my_cnf(
    binary: ServerBinary,
    settings: MySQLSettings,
    paths: ServerPaths,
    port: int,
    template: Path = TEMPLATE,
    euid: int | None = None,
    bind_address: str = "127.0.0.1",
) -> str:
    """The full my.cnf text for one server life. Every path and value goes through option_value:
    a '#' in a path (an --out of the user's) must not cut it short in the server's eyes."""
    euid = os.geteuid() if euid is None else euid
    try:
        text = template.read_text()
    except OSError as e:
        raise ServerError(f"{template}: cannot read the my.cnf template: {e.strerror}") from None
    values = {
        # mysqld refuses to run as root unless told to; as another user it runs as that user.
        "user_line": "user = root" if euid == 0 else "",
        "basedir": option_value(binary.basedir, "basedir"),
        "datadir": option_value(paths.datadir, "datadir"),
        "tmpdir": option_value(paths.tmpdir, "tmpdir"),
        "socket": option_value(paths.socket, "socket"),
        "pid_file": option_value(paths.pid_file, "pid_file"),
        "error_log": option_value(paths.error_log, "error_log"),
        "port": port,
        "bind_address": bind_address,
        "max_threads": settings.max_threads,
        "max_connections": settings.max_connections,
        "thread_cache_size": settings.thread_cache_size,
        "back_log": settings.back_log,
        "open_files_limit": settings.open_files_limit,
        "table_open_cache": settings.table_cache,
        "max_prepared_stmt_count": settings.max_prepared_stmt_count,
        "buffer_pool_mb": settings.buffer_pool_mb,
        "redo_line": redo_line(binary, settings.innodb_log_file_mb),
        "flush_log_at_trx_commit": settings.flush_log_at_trx_commit,
        "performance_schema": "ON" if performance_schema(binary, settings) else "OFF",
        "flavor_lines": "\n".join(
            flavor_lines(binary, paths, settings)
            + engine_lines(
                binary,
                settings.engine,
                settings.rocksdb_block_cache_mb,
                settings.rocksdb_write_buffer_mb,
            )
        ),
        "extra_lines": "\n".join(extra_lines(settings.extra)),
    }
    try:
        return Template(text).substitute(values)
    except (KeyError, ValueError) as e:
        raise ServerError(f"{template}: unknown or malformed placeholder {e}") from None
