"""`mallocsweep kit build`: one archive that runs the suites on an air-gapped host (suites/kit/)."""

from __future__ import annotations

import argparse
import sys
import time

HELP = """\
Build a kit: one archive (zstd, or gzip where zstd is missing or the name ends .tar.gz) that
unpacks to one directory able to run the suites on a Linux host of any distribution with nothing
installed there: no Python, no package manager, no network. Inside: a minimal Debian root of this
host's release with Python and this mallocsweep (a wheel of this checkout, not editable),
sysbench, every allocator package, the exec helper and the preload shims already built, the
servers you choose, the shipped suites, and an executable launcher `mallocsweep` at the top.

Needs root here (debootstrap, chroot) and Debian's archive and PyPI while it builds (minutes;
the minimal root is debootstrapped once and kept with the fetched servers).

On the target, as root:
  tar xf mallocsweep-kit.tar.zst
  mallocsweep-kit/mallocsweep doctor          what the host lacks (root, mounts, THP, cgroups...)
  mallocsweep-kit/mallocsweep run smoke       a shipped suite by name, or a path to your own
  mallocsweep-kit/mallocsweep verify          every component against SHA256SUMS

Run directories are written under the directory the launcher is started from (or --out), never
inside the kit; each run's manifest.json records the kit's manifest (kit.json: every component's
version and sha256) under "kit", and reports and compares on any machine with mallocsweep.
"""

EPILOG = """\
examples:
  sudo mallocsweep kit build --out mallocsweep-kit.tar.zst
  sudo mallocsweep kit build --out kit-mysql.tar.zst --server host --server fetched:mysql-9.7.4
      (fetch it first: mallocsweep servers fetch mysql-9.7.4)
  sudo mallocsweep kit build --out kit.tar.gz          gzip, for hosts without zstd
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "kit",
        help="build one archive that runs the suites on a host with nothing installed",
        description="A self-contained mallocsweep for air-gapped hosts (see `kit build --help`).",
    )
    verbs = p.add_subparsers(dest="kit_command", metavar="ACTION", required=True)
    b = verbs.add_parser(
        "build",
        help="write the kit archive to --out",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="the archive to write (a new file: an existing one is never replaced); it unpacks "
        "to a directory named like it without .tar.zst/.tar.gz",
    )
    b.add_argument(
        "--server",
        action="append",
        metavar="host|fetched:SPEC",
        help="a server the kit carries, repeatable: 'host' (Debian's mariadb-server of this "
        "release, installed in the kit's root; the default) or 'fetched:SPEC' (a server "
        "fetched with `mallocsweep servers fetch SPEC`, copied in)",
    )
    b.set_defaults(func=run_build)


def run_build(args) -> int:
    from suites.kit.build import build
    from suites.kit.request import parse_request

    req = parse_request(args.out, args.server)
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    res = build(req, say)
    print(
        f"{res.out}: {res.size_bytes / 1e6:,.0f} MB, {len(res.manifest.components)} components "
        f"({', '.join(req.servers)}), built in {res.seconds:.0f} s; on the target: tar xf "
        f"{res.out.name} && {req.dirname}/mallocsweep doctor"
    )
    return 0
