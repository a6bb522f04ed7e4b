"""Storage engines a MySQL-family server can run the workload's tables on (a matrix dimension).

InnoDB is built into every MySQL-family server. MyRocks (`rocksdb`) is a plugin: MariaDB ships it
as ha_rocksdb.so in a package of its own (Debian: mariadb-plugin-rocksdb, the server's exact
version), Percona Server ships its own build, and MySQL has none. Whether a server has it is
decided from its files before any server starts (the plugin must sit in the server's own plugin
directory: a plugin of another server version is refused at load time, or worse, loads), and
the generated my.cnf then loads it from exactly there.

What MyRocks needs here (measured on this kernel, ext4): it starts with Debian's defaults
(rocksdb_use_direct_reads and rocksdb_use_direct_io_for_flush_and_compaction OFF, i.e. buffered
I/O through the page cache); O_DIRECT is also accepted on ext4 (both ON started and flushed), but
tmpfs refuses O_DIRECT, so a datadir on tmpfs (the Symas study's setup) must keep them OFF. We keep
them OFF: buffered I/O works on every filesystem, and the page cache is outside the server's RSS
either way.
"""

from __future__ import annotations

from pathlib import Path

from servers.errors import ServerError

INNODB = "innodb"
ROCKSDB = "rocksdb"
ENGINES = (INNODB, ROCKSDB)
ROCKSDB_PLUGIN = "ha_rocksdb.so"
# The SQL names of the engines (CREATE TABLE ... ENGINE=, sysbench --mysql-storage-engine).
SQL_NAME = {INNODB: "InnoDB", ROCKSDB: "ROCKSDB"}


def plugin_dir(binary) -> str:
    """The plugin directory of `binary` as the server sees it (inside its root, if any):
    <basedir>/lib/mysql/plugin, Debian's layout for MariaDB (basedir is the install prefix)."""
    return str(Path(binary.basedir) / "lib" / "mysql" / "plugin")


def _host(binary, path: str) -> Path:
    return Path(binary.root.host(path)) if getattr(binary, "root", None) else Path(path)


def check_engine(binary, engine: str) -> None:
    """ServerError (one line) when `binary` cannot run `engine`; nothing is started."""
    if engine == INNODB:
        return
    if engine != ROCKSDB:
        raise ServerError(f"server.engines: unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    who = f"{binary.flavor} {binary.version} ({binary.path})"
    if binary.flavor == "mysql":
        raise ServerError(
            f"server.engines: rocksdb: {who} has no MyRocks engine (MySQL does not ship one; "
            "MariaDB and Percona Server do)"
        )
    plugin = Path(plugin_dir(binary)) / ROCKSDB_PLUGIN
    if not _host(binary, str(plugin)).is_file():
        hint = (
            "install the Debian package mariadb-plugin-rocksdb of the same version"
            if binary.flavor == "mariadb"
            else "install the server's MyRocks plugin"
        )
        raise ServerError(f"server.engines: rocksdb: {who} has no {plugin} ({hint})")


def check_tables(cur, schema: str, engine: str, tables: list[str] | None = None) -> None:
    """ServerError unless every table of `schema` (or those named: the workload's own) is on
    `engine` (a DB-API cursor): a server that lacks an engine may substitute its default engine
    without failing the CREATE TABLE."""
    cur.execute(
        "SELECT table_name, engine FROM information_schema.tables WHERE table_schema = %s",
        (schema,),
    )
    rows = cur.fetchall()
    if tables is not None:
        rows = [(t, e) for t, e in rows if str(t) in set(tables)]
    wrong = [(t, e) for t, e in rows if str(e).lower() != engine]
    if not rows or wrong:
        got = ", ".join(f"{t}={e}" for t, e in wrong) or "no tables"
        raise ServerError(f"{schema}: tables are not on {engine}: {got}")


def engine_lines(binary, engine: str, block_cache_mb: int, write_buffer_mb: int) -> list[str]:
    """The my.cnf [mysqld] lines an engine needs: none for InnoDB; for MyRocks, the plugin loaded
    from the server's own plugin directory and its memory sized (block cache = its buffer pool,
    write_buffer_size = one memtable of the default column family)."""
    if engine != ROCKSDB:
        return []
    return [
        f"plugin_dir = {plugin_dir(binary)}",
        f"plugin-load-add = {ROCKSDB_PLUGIN}",
        f"rocksdb_block_cache_size = {block_cache_mb}M",
        f"rocksdb_default_cf_options = write_buffer_size={write_buffer_mb}m",
        # Buffered I/O (see the module docstring): explicit, so the my.cnf says what ran.
        "rocksdb_use_direct_reads = OFF",
        "rocksdb_use_direct_io_for_flush_and_compaction = OFF",
    ]
