"""Ports the launcher picks itself must pass its own pre-flight check."""

from __future__ import annotations

import contextlib
import resource
import socket
from typing import Iterator, List

from malaunch.net import free_port, port_in_use, taken_anywhere

HELD = 500


@contextlib.contextmanager
def ports_held_on(address: str, count: int) -> Iterator[List[int]]:
    """``count`` sockets bound (not listening) on ``address``, as the source ports of other
    programs' connections or another simulated node's servers hold them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    held: List[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((address, 0))
            held.append(sock)
        yield [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_free_port_is_free_on_every_address_not_only_loopback() -> None:
    # A port bound on 127.0.0.2 is free on 127.0.0.1, yet a server on the wildcard (and the
    # launcher's own check) cannot bind it: such ports were handed out as master ports and
    # then refused with 71 "already in use".
    with ports_held_on("127.0.0.2", HELD) as held:
        taken = set(held)
        picked = [free_port("127.0.0.1") for _ in range(400)]
        assert not taken.intersection(picked)
        assert not any(port_in_use("0.0.0.0", port) for port in picked[:50])


def test_taken_anywhere_sees_a_listener_on_one_address() -> None:
    # The pre-flight check and free_port's own check are one function: a listener on any
    # one address of this host takes the port for a server on the wildcard.
    with socket.socket() as listener:
        listener.bind(("127.0.0.3", 0))
        listener.listen()
        port = int(listener.getsockname()[1])
        assert taken_anywhere(port)
    assert not taken_anywhere(port)
