"""Ports: a free one for local runs, and whether a server could bind one now (one probe for
the pre-flight checks, local runs and tests)."""

from __future__ import annotations

import errno
import socket


def family_of(host: str) -> socket.AddressFamily:
    """The address family of a numeric address (IPv6 when it holds a colon)."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing uses on any address of this host right now.

    The kernel picks it for the wildcard address of ``host``'s family, not for ``host``
    itself: a port free on 127.0.0.1 may still be bound on 127.0.0.2 or by a connection's
    source address, and a rendezvous server on the wildcard (and the pre-flight check, which
    binds the wildcard: :func:`port_taken`) would then find it taken. Another process may
    still take it before the caller binds, the usual, accepted race of this technique
    (torchrun does the same).
    """
    family = family_of(host)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", 0))
        return int(sock.getsockname()[1])


def port_taken(port: int, family: socket.AddressFamily, address: str) -> bool:
    """Whether a server binding ``address:port`` now would get EADDRINUSE.

    SO_REUSEADDR is on, as in every rendezvous server: then Linux refuses the bind only when
    a socket *listens* on the port (or is bound to it without the option), while connections
    of a previous run lingering in TIME_WAIT do not count; without it the check would refuse
    a port for a minute after every run.

    :raises OSError: the address family or address is not available here.
    """
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            # v6-only: the IPv4 wildcard is checked on its own; a dual-stack bind would also
            # fail for a v4-only listener and report it under the wrong address.
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def port_in_use(host: str, port: int) -> bool:
    """Whether a server could not bind ``host:port`` now (see :func:`port_taken`)."""
    return port_taken(port, family_of(host), host)
