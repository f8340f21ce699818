"""Node 0's sockets on the job channel: the listener, and each connection's :class:`Outbox`.

Node 0 serves thousands of node launchers from one event loop, so it never blocks in a send:
every connection is non-blocking, and what the kernel does not take at once waits in the
connection's outbox, sent when the socket can take more. A peer that leaves
:data:`MAX_WAITING` bytes unread, or takes nothing for :data:`~malaunch.job.protocol.SEND_TIMEOUT`
seconds, is gone (as a blocking send would have said, without stopping everyone else meanwhile).
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from typing import Callable, Optional, Tuple

from malaunch.events import EventLoop
from malaunch.job.protocol import MAX_MESSAGE

BACKLOG = 65535  # connections the kernel queues for us (capped by net.core.somaxconn)
MAX_WAITING = 4 * MAX_MESSAGE  # bytes that may wait for one peer: a few of the largest messages


class Outbox:
    """Non-blocking writes to one socket; ``on_error(why)`` once the peer is taken for gone."""

    def __init__(self, loop: EventLoop, sock: socket.socket, on_error: Callable[[str], None]):
        self.loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self.on_error = on_error
        self.data = b""
        self.since: Optional[float] = None  # since when data waits without the peer taking any

    def write(self, data: bytes) -> None:
        """Send ``data`` now as far as the socket takes it; the rest waits for the loop."""
        if self.data:
            if len(self.data) + len(data) > MAX_WAITING:
                self.on_error(f"it left {len(self.data)} bytes unread")
                return
            self.data += data
            return
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self.on_error(str(exc))
            return
        if sent < len(data):
            self.data, self.since = data[sent:], self.loop.now()
            self.loop.add_writer(self.fd, self._flush)

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self.data)
        except BlockingIOError:
            return
        except OSError as exc:
            self.on_error(str(exc))
            return
        self.data = self.data[sent:]
        self.since = self.loop.now()
        if not self.data:
            self.since = None
            self.loop.remove_writer(self.fd)

    def waited(self, now: float) -> float:
        """Seconds the data waiting now has gone without the peer taking any (0: none waits)."""
        return 0.0 if self.since is None else now - self.since

    def drain(self, deadline: float) -> None:
        """Before the connection closes: wait until ``deadline`` (``time.monotonic``) at most
        for the peer to take what still waits for it."""
        left = deadline - time.monotonic()
        if self.data and left > 0:
            with contextlib.suppress(OSError):
                self.sock.settimeout(left)
                self.sock.sendall(self.data)
                self.data = b""

    def close(self) -> None:
        self.loop.remove_writer(self.fd)
        self.data, self.since = b"", None


def listen(port: int) -> socket.socket:
    """A non-blocking listening socket on every interface, IPv6 and IPv4 where the host has
    both, with a backlog deep enough for every node of a large job to connect at once, or for
    a flood in front of a node (the kernel caps it at ``net.core.somaxconn``)."""
    if socket.has_dualstack_ipv6():
        listener = socket.create_server(
            ("", port),
            family=socket.AF_INET6,
            dualstack_ipv6=True,
            reuse_port=False,
            backlog=BACKLOG,
        )
    else:
        listener = socket.create_server(("", port), backlog=BACKLOG)
    listener.setblocking(False)
    return listener


def source_host(address: Tuple[object, ...]) -> str:
    """The source address of a connection without the port (IPv4 without its IPv6 mapping)."""
    host = str(address[0])
    return host[len("::ffff:") :] if host.startswith("::ffff:") else host


def source_text(address: Tuple[object, ...]) -> str:
    """``HOST:PORT``, ``[HOST]:PORT`` for IPv6: how a connection is named in warnings."""
    host, port = source_host(address), address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def pending(sock: socket.socket) -> bool:
    """Whether ``sock`` has something to read (bytes or end of file), without waiting."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))
