r"""Values written into a MySQL-family option file (my.cnf), made safe for its parser.

The parser (mysys my_default: MariaDB 10.11/11.8 and MySQL 9.7 agree, checked with each one's
my_print_defaults in tests/unit/test_option_file_quoting.py) reads `key = value` lines where:
- an unquoted `#` starts a comment anywhere in the line (a ';' only at the start of a line), so
  `datadir = /runs/a#b/x` is read as `/runs/a`: the server then runs in another directory;
- one pair of matching quotes around the whole value is removed, and a `#` inside quotes is kept;
- backslash sequences are decoded everywhere: \\ \" \' \n \t \r \b \s (others keep the backslash);
- leading and trailing blanks of an unquoted value are dropped.
So a value is written double-quoted with `\\` and `"` escaped whenever it holds anything the
parser would change; a line break or NUL cannot be represented in a path we hand over and is
refused with a one-line error naming the value.
"""

from __future__ import annotations

from servers.errors import ServerError

# Characters that make the parser read something else than what was written.
_SPECIAL = frozenset("#;'\"\\")


def needs_quoting(value: str) -> bool:
    return value == "" or value != value.strip() or any(c in _SPECIAL for c in value)


def option_value(value: object, what: str) -> str:
    """`value` as the right-hand side of a my.cnf line that the server reads back unchanged.

    `what` names the value for the error (e.g. "datadir", "server.settings.init_connect")."""
    text = str(value)
    for bad, name in (("\n", "a line break"), ("\r", "a carriage return"), ("\0", "a NUL byte")):
        if bad in text:
            raise ServerError(
                f"{what} contains {name} ({text!r}), which a my.cnf option file cannot hold; "
                "choose a value without it"
            )
    if not needs_quoting(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
