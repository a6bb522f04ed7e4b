"""Private TCP ports on 127.0.0.1: find a free one, and check one before a server claims it.

Other servers (other runs, other engineers' tests) share this machine, so a fixed port is never
safe: we ask the kernel for a free one, and check a user-given one before launching, so a clash is
reported by port number instead of as a server that silently failed to bind.
"""

from __future__ import annotations

import errno
import socket


def free_port(address: str = "127.0.0.1") -> int:
    """A port on `address` that nothing is bound to right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def port_in_use(port: int, address: str = "127.0.0.1") -> bool:
    """True when something on this machine holds `port` on `address` (bound or listening).

    Binding is the test that matches what the server will do; SO_REUSEADDR lets a port in
    TIME_WAIT count as free, as it will for the server (which sets the same option).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False
