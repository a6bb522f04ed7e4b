"""`mallocsweep allocators`: which allocators this machine can test, and why not the others."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from suites.runner.display import stdout_console


def add_parser(sub) -> None:
    p = sub.add_parser(
        "allocators",
        help="list detected allocators (name, library, version, usable)",
        description="List the allocators of configs/allocators.toml as found on this machine: the "
        "library that would be preloaded (absolute path), its package version and sha256, and "
        "whether it is usable (and if not, what to install). 'core' ones are what 'all' means.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    from servers.allocators import detect_all

    found = detect_all()
    if args.json:
        print(
            json.dumps(
                [
                    a.to_manifest() | {"usable": a.usable, "why_not": a.why_not, "core": a.core}
                    for a in found
                ],
                indent=2,
            )
        )
        return 0
    t = Table(title="Allocators", show_lines=False)
    for col in ("name", "core", "usable", "version", "library / why not"):
        t.add_column(col, overflow="fold")  # paths are wrapped, never cut
    for a in found:
        lib = a.library or (
            "(no preload: glibc malloc)" if a.kind == "system" else "(the binary's own)"
        )
        t.add_row(
            a.name,
            "yes" if a.core else "variant",
            "[green]yes[/green]" if a.usable else "[red]no[/red]",
            a.version or "",
            lib if a.usable else (a.why_not or ""),
        )
    stdout_console().print(t)
    return 0
