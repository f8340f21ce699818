"""Ports: a free one for local runs, and whether a server could bind one now (one probe for
the pre-flight checks, local runs and tests)."""

from __future__ import annotations

import errno
import socket
from typing import List, Tuple

# How many ports free_port() draws before it settles for one that is held somewhere.
DRAWS = 50


def family_of(host: str) -> socket.AddressFamily:
    """The address family of a numeric address (IPv6 when it holds a colon)."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on at ``host`` right now, and that a server could bind
    on every address of this host (what the pre-flight check asks of a master port).

    The kernel picks a port free at ``host``; on a busy host that port may still be held on
    another address, say by a connection in TIME_WAIT from 127.1.0.5 that was bound without
    ``SO_REUSEADDR``, which makes the wildcard bind of a rendezvous server fail: such a port is
    drawn again. Another process may still take the port before the caller binds it, which is
    the usual, accepted race of this technique (torchrun does the same).
    """
    port = 0
    for _ in range(DRAWS):
        with socket.socket(family_of(host), socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if not port_held(port):
            break
    return port


def wildcards() -> List[Tuple[socket.AddressFamily, str]]:
    """The addresses a rendezvous server binds: the wildcard of each address family.

    torch's TCPStore, TF and MindSpore's scheduler listen on all interfaces, so a listener on
    any address of this host (also 127.0.0.1 only) would make their bind fail; binding the
    wildcard sees every such conflict.
    """
    families = [(socket.AF_INET, "0.0.0.0")]
    if socket.has_ipv6:
        families.append((socket.AF_INET6, "::"))
    return families


def port_held(port: int) -> bool:
    """Whether a rendezvous server binding ``port`` on the wildcard of some address family
    here would fail now (:func:`port_taken`); a family this host lacks holds nothing."""
    for family, address in wildcards():
        try:
            if port_taken(port, family, address):
                return True
        except OSError:  # this address family is not available here
            continue
    return False


def port_taken(port: int, family: socket.AddressFamily, address: str) -> bool:
    """Whether a server binding ``address:port`` now would get EADDRINUSE.

    SO_REUSEADDR is on, as in every rendezvous server: then Linux refuses the bind only when
    a socket *listens* on the port (or is bound to it without the option, also a client's
    connection bound to a source address, until its TIME_WAIT ends), while the connections a
    server of a previous run accepted, lingering in TIME_WAIT, do not count; without it the
    check would refuse a port for a minute after every run.

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
