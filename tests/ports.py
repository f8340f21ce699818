"""Loopback ports for tests that run side by side (``pytest -n 2``) and beside other suites.

The usual way to find a free port (bind port 0, read it, close, hand the number on) leaves a
window in which any other process asking the kernel for a port can be given the same one:
two tests then start servers on one port, or a port "free" a moment ago is taken when a test
checks it. A :class:`Reservations` keeps each port it hands out *bound* until the test ends,
with ``SO_REUSEADDR`` and without listening. On Linux that is a port

- the kernel gives to no one else (``bind`` to port 0, an outgoing connection's own port),
- a connection to is refused (nothing listens), as for a closed port,
- any server that sets ``SO_REUSEADDR`` may still listen on: every rendezvous server does
  (torch's TCPStore, the job channel, moto/werkzeug), and so does malaunch's pre-flight
  probe (``malaunch.net.port_taken``), which therefore still calls it free.

Use the ``free_port`` fixture (``tests/conftest.py``) in a test; helpers outside a test
(``e2e/s3server.py``) use :func:`reserve` and close the socket when done.
"""

from __future__ import annotations

import socket
from typing import List

LOOPBACK = "127.0.0.1"


def reserve(host: str = LOOPBACK) -> socket.socket:
    """A socket bound to a fresh port of ``host`` (IPv4), not listening; the port is
    ``sock.getsockname()[1]`` and stays reserved until the socket is closed."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
    except OSError:
        sock.close()
        raise
    return sock


class Reservations:
    """Ports reserved for one test: call it for a new one; :meth:`close` frees them all."""

    def __init__(self) -> None:
        self._held: List[socket.socket] = []

    def __call__(self, host: str = LOOPBACK) -> int:
        sock = reserve(host)
        self._held.append(sock)
        return int(sock.getsockname()[1])

    def close(self) -> None:
        for sock in self._held:
            sock.close()
        self._held.clear()
