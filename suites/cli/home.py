"""`~` in a path the user gives on the command line: expanded, as the shell would have.

A shell expands `~` only at the start of an unquoted word: `--out '~/runs'`, `--out=~/runs` (in
bash, after `=` of an option only in some modes) or a path from a script reach us with the `~`
still there. Taken literally, it made a directory named `~` in the working directory, which a
later `rm -rf ~` meant for it would take the home directory with. So every path argument
starting with `~` is expanded here, before any command sees it; `~user` for a user this machine
does not know is refused in one line (nothing is created under a literal `~`).
"""

from __future__ import annotations

import os
from pathlib import Path

# The argparse destinations that are paths (or may be, for --server: a binary's path)
PATH_DESTS = (
    "run_dir", "runs", "base", "new", "out", "resume", "suite", "server_root", "server", "space",
)  # fmt: skip


def expand(value: str, option: str) -> str:
    """`value` with a leading `~` or `~user` expanded; ValueError (one line) when it cannot be."""
    if not value.startswith("~"):
        return value
    done = os.path.expanduser(value)
    if done.startswith("~"):
        user = value[1:].split("/", 1)[0]
        raise ValueError(
            f"{option} {value}: no user {user!r} here to take '~{user}' from, and a directory "
            "named '~' is never made; give the path without '~'"
        )
    return done


def expand_args(args) -> str | None:
    """Expand `~` in the parsed arguments' paths, in place; the one-line refusal, or None."""
    for dest in PATH_DESTS:
        if not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        option = (
            dest
            if dest in ("run_dir", "runs", "base", "new", "suite")
            else "--" + dest.replace("_", "-")
        )
        try:
            if isinstance(value, Path):
                setattr(args, dest, Path(expand(str(value), option)))
            elif isinstance(value, str):
                setattr(args, dest, expand(value, option))
            elif isinstance(value, list):
                setattr(
                    args,
                    dest,
                    [Path(expand(str(v), option)) if isinstance(v, Path) else v for v in value],
                )
        except ValueError as e:
            return str(e)
    return None
