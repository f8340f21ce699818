"""Loopback ports for local runs and tests."""

from __future__ import annotations

import socket


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on at ``host`` right now.

    The kernel picks it; another process may still take it before the caller binds, which is
    the usual, accepted race of this technique (torchrun does the same).
    """
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(host: str, port: int) -> bool:
    """Whether a server could not bind ``host:port`` now.

    Binds with SO_REUSEADDR, as servers do, so a port left in TIME_WAIT by a finished run does
    not count as taken while a listening socket does.
    """
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False
