"""The port helpers: a port :func:`free_port` gives is one a server may bind on every
interface, whatever other addresses of this host hold."""

from __future__ import annotations

import resource
import socket
from typing import Iterator, List

import pytest

from malaunch.net import free_port, port_taken, taken_anywhere

HELD = 9000


@pytest.fixture()
def held_on_127_0_0_2() -> Iterator[List[int]]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HELD + 200:
        pytest.skip(f"needs {HELD + 200} open files (hard limit {hard})")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, HELD + 200), hard))
    held = []
    try:
        for _ in range(HELD):
            sock = socket.socket()
            sock.bind(("127.0.0.2", 0))
            held.append(sock)
        yield [int(sock.getsockname()[1]) for sock in held]
    finally:
        for sock in held:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_free_port_avoids_ports_held_on_another_address(held_on_127_0_0_2: List[int]) -> None:
    held = set(held_on_127_0_0_2)
    picked = [free_port("127.0.0.1") for _ in range(40)]
    assert not held.intersection(picked)
    for port in picked:
        with socket.socket() as server:  # what a rendezvous server does
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("0.0.0.0", port))


def test_taken_anywhere_sees_a_listener_on_one_address() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.3", 0))
        listener.listen()
        port = int(listener.getsockname()[1])
        assert taken_anywhere(port)
        assert port_taken(port, socket.AF_INET, "0.0.0.0")
    assert not taken_anywhere(port)
