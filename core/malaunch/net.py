"""Ports: a free one for local runs, and whether a server could bind one now (one probe for
the pre-flight checks, local runs and tests)."""

from __future__ import annotations

import errno
import socket
from typing import List, Tuple


def family_of(host: str) -> socket.AddressFamily:
    """The address family of a numeric address (IPv6 when it holds a colon)."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


# Draws of the kernel's pick before the last one is taken as it is (each is a bind and a
# check, about 20 us).
PICKS = 64


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing uses on any address of this host right now.

    The kernel picks it for the wildcard address of ``host``'s family, not for ``host``
    itself: a port free on 127.0.0.1 may still be bound on 127.0.0.2 or by a connection's
    source address, and a rendezvous server on the wildcard (and the pre-flight check, which
    binds the wildcard: :func:`port_taken`) would then find it taken. The other family's
    wildcard may still hold it (a listener on ``::`` only), so each pick is checked as the
    pre-flight does (:func:`taken_anywhere`) and drawn again. Another process may still take
    it before the caller binds, the usual, accepted race of this technique (torchrun does the
    same).
    """
    family = family_of(host)
    wildcard = "::" if family == socket.AF_INET6 else "0.0.0.0"
    port = 0
    for _ in range(PICKS):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((wildcard, 0))
            port = int(sock.getsockname()[1])
        if not taken_anywhere(port):
            return port
    return port


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


def wildcards() -> List[Tuple[socket.AddressFamily, str]]:
    """The addresses a rendezvous server binds: the wildcard of each address family.

    torch's TCPStore, TF and MindSpore's scheduler listen on all interfaces, so a listener on
    any address of this host (also 127.0.0.1 only) would make their bind fail; binding the
    wildcard sees every such conflict. The master address itself may be a name of a load
    balancer or another interface, so it is not bound directly.
    """
    found = [(socket.AF_INET, "0.0.0.0")]
    if socket.has_ipv6:
        found.append((socket.AF_INET6, "::"))
    return found


def taken_anywhere(port: int) -> bool:
    """Whether a server binding ``port`` on every interface would get EADDRINUSE now, in any
    address family this host has (see :func:`port_taken`)."""
    for family, address in wildcards():
        try:
            if port_taken(port, family, address):
                return True
        except OSError:  # this address family is not available here
            continue
    return False
