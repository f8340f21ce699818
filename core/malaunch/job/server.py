"""Node 0's end of the job channel: accept the other node launchers, authenticate them, pass
their reports on, send them commands, and notice when one disappears.

A connection is a *stranger* until it answers the challenge (see :mod:`malaunch.job.protocol`)
within :data:`HANDSHAKE_TIMEOUT`; a stranger that sends anything else, or too much, is closed
with a warning and changes nothing. At most :data:`MAX_STRANGERS` wait at once, and the
warnings strangers cause are throttled (:mod:`malaunch.job.throttle`): a flood of connections
gives a few lines with counts, not a line each. An
authenticated node that closes its connection without saying ``bye``, or stays silent for
the heartbeat timeout, is *lost*: it counts as that node failing.
"""

from __future__ import annotations

import dataclasses
import socket
from typing import Callable, Dict, Optional, Tuple

from malaunch.events import EventLoop, Timer
from malaunch.job.protocol import (
    PROTOCOL_VERSION,
    SEND_TIMEOUT,
    LineReader,
    Message,
    ProtocolError,
    new_nonce,
    nonce_ok,
    proof_ok,
    send,
    welcome_proof,
)
from malaunch.job.settings import JobSettings
from malaunch.job.throttle import Throttle
from malaunch.log import logger

HANDSHAKE_TIMEOUT = 5.0
MAX_STRANGERS = 64
RECV_CHUNK = 65536
MAX_WARNINGS = 5  # per peer: a babbling node must not flood the launcher's own log
SHOWN_REJECTIONS = 5  # rejected strangers named per throttle window; the rest are counted


@dataclasses.dataclass
class _Connection:
    sock: socket.socket
    address: str
    reader: LineReader
    nonce: str = ""
    node: Optional[int] = None
    last_seen: float = 0.0
    said_bye: bool = False
    timer: Optional[Timer] = None
    warnings: int = 0


class ChannelServer:
    """Listens on ``settings.port`` on every interface; nodes 1..N-1 connect to it."""

    def __init__(
        self,
        loop: EventLoop,
        settings: JobSettings,
        on_join: Callable[[int], None],
        on_report: Callable[[int, Message], None],
        on_lost: Callable[[int], None],
    ) -> None:
        self.loop = loop
        self.settings = settings
        self.on_join = on_join
        self.on_report = on_report
        self.on_lost = on_lost
        self.listener = _listen(settings.port)
        self.strangers: Dict[int, _Connection] = {}
        self.peers: Dict[int, _Connection] = {}
        self.closed = False
        self.turned_away = Throttle(
            loop,
            burst=1,
            summary=lambda count, seconds: (
                f"job channel: too many unauthenticated connections ({MAX_STRANGERS} waiting): "
                f"closed {count} more in {seconds:.0f}s"
            ),
        )
        self.rejections = Throttle(
            loop,
            burst=SHOWN_REJECTIONS,
            summary=lambda count, seconds: (
                f"job channel: rejected {count} more connections in {seconds:.0f}s (not shown)"
            ),
        )
        loop.add_reader(self.listener.fileno(), self._accept)
        self._beat = loop.call_later(settings.heartbeat_interval, self._heartbeat)

    # -- sending --------------------------------------------------------------------------

    def broadcast(self, message: Message) -> None:
        for node in sorted(self.peers):
            self.send(node, message)

    def send(self, node: int, message: Message) -> None:
        peer = self.peers.get(node)
        if peer is None:
            return
        try:
            send(peer.sock, message)
        except OSError as exc:
            self._drop(peer, f"cannot send to node {node}: {exc}")

    # -- accepting and handshakes ---------------------------------------------------------

    def _accept(self) -> None:
        try:
            sock, address = self.listener.accept()
        except OSError:
            return
        where = _address(address)
        if len(self.strangers) >= MAX_STRANGERS:
            self.turned_away.warn(
                f"job channel: too many unauthenticated connections ({MAX_STRANGERS} waiting): "
                f"closed {where}"
            )
            sock.close()
            return
        sock.settimeout(SEND_TIMEOUT)
        conn = _Connection(sock, where, LineReader(), nonce=new_nonce())
        try:
            send(sock, {"t": "challenge", "nonce": conn.nonce, "version": PROTOCOL_VERSION})
        except OSError:
            sock.close()
            return
        self.strangers[sock.fileno()] = conn
        conn.timer = self.loop.call_later(HANDSHAKE_TIMEOUT, lambda: self._timeout(conn))
        self.loop.add_reader(sock.fileno(), lambda: self._readable(conn))

    def _timeout(self, conn: _Connection) -> None:
        if conn.node is None and conn.sock.fileno() in self.strangers:
            self._reject(conn, f"no handshake within {HANDSHAKE_TIMEOUT:g}s")

    def _hello(self, conn: _Connection, message: Message) -> None:
        node = message.get("node")
        nodes = range(1, self.settings.nnodes)
        theirs = message.get("nonce")
        if message.get("t") != "hello" or not isinstance(node, int) or node not in nodes:
            self._reject(conn, f"expected a hello from node 1-{self.settings.nnodes - 1}")
        elif not proof_ok(self.settings.token, conn.nonce, node, message.get("proof")):
            why = "another job, a node that disagrees on the job, or a different --job-secret"
            self._reject(conn, f"wrong token ({why})")
        elif not nonce_ok(theirs):
            self._reject(conn, "a hello without a valid nonce to prove ourselves on")
        elif node in self.peers:
            self._reject(conn, f"node {node} has already joined")
        else:
            if conn.timer is not None:
                conn.timer.cancel()
            del self.strangers[conn.sock.fileno()]
            conn.node, conn.last_seen = node, self.loop.now()
            self.peers[node] = conn
            try:
                # The node trusts nothing from us before this proof (mutual authentication).
                welcome = {"t": "welcome", "proof": welcome_proof(self.settings.token, str(theirs))}
                send(conn.sock, welcome)
            except OSError as exc:
                self._drop(conn, f"cannot welcome node {node}: {exc}")
                return
            logger.debug(f"job channel: node {node} joined from {conn.address}")
            self.on_join(node)

    def _reject(self, conn: _Connection, why: str) -> None:
        self.rejections.warn(f"job channel: rejected a connection from {conn.address}: {why}")
        self.strangers.pop(conn.sock.fileno(), None)
        if conn.timer is not None:
            conn.timer.cancel()
        self._close(conn)

    # -- reading --------------------------------------------------------------------------

    def _readable(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(RECV_CHUNK)
        except OSError as exc:
            data, reason = b"", f"connection error: {exc}"
        else:
            reason = "connection closed"
        if not data:
            if conn.node is None:
                self.strangers.pop(conn.sock.fileno(), None)
                self._close(conn)
            else:
                self._drop(conn, reason)
            return
        try:
            for message in conn.reader.feed(data):
                if conn.node is None:
                    self._hello(conn, message)
                    if conn.node is None:
                        return
                else:
                    self._from_peer(conn, message)
        except ProtocolError as exc:
            if conn.node is None:
                self._reject(conn, str(exc))
            else:
                self._drop(conn, f"protocol violation: {exc}")
            return
        self._warn_dropped(conn)

    def _from_peer(self, conn: _Connection, message: Message) -> None:
        assert conn.node is not None
        conn.last_seen = self.loop.now()
        kind = message["t"]
        if kind == "ping":
            return
        if kind == "bye":
            conn.said_bye = True
            return
        self.on_report(conn.node, message)

    def _warn_dropped(self, conn: _Connection) -> None:
        while conn.reader.dropped:
            why = conn.reader.dropped.pop(0)
            if conn.node is None:
                self.strangers.pop(conn.sock.fileno(), None)
                self._reject(conn, why)
                return
            conn.warnings += 1
            if conn.warnings <= MAX_WARNINGS:
                logger.warning(
                    f"job channel: dropped a malformed message from node {conn.node}: {why}"
                )

    # -- liveness -------------------------------------------------------------------------

    def _heartbeat(self) -> None:
        if self.closed:
            return
        now = self.loop.now()
        for node, peer in sorted(self.peers.items()):
            silent = now - peer.last_seen
            if silent > self.settings.heartbeat_timeout:
                self._drop(peer, f"no heartbeat for {silent:.1f}s")
            else:
                self.send(node, {"t": "ping"})
        self._beat = self.loop.call_later(self.settings.heartbeat_interval, self._heartbeat)

    def _drop(self, conn: _Connection, reason: str) -> None:
        node = conn.node
        if node is None or self.peers.get(node) is not conn:
            return
        del self.peers[node]
        self._close(conn)
        if conn.said_bye:
            logger.debug(f"job channel: node {node} left")
            return
        logger.error(f"job channel: lost node {node}'s launcher ({reason})")
        self.on_lost(node)

    def _close(self, conn: _Connection) -> None:
        self.loop.remove_reader(conn.sock.fileno())
        conn.sock.close()

    def close(self) -> None:
        """Stop listening and close every connection (the peers see end of file)."""
        self.closed = True
        self._beat.cancel()
        self.turned_away.close()
        self.rejections.close()
        for conn in [*self.strangers.values(), *self.peers.values()]:
            if conn.timer is not None:
                conn.timer.cancel()
            self._close(conn)
        self.strangers.clear()
        self.peers.clear()
        self.loop.remove_reader(self.listener.fileno())
        self.listener.close()


def _listen(port: int) -> socket.socket:
    """A listening socket on every interface, IPv6 and IPv4 where the host has both."""
    if socket.has_dualstack_ipv6():
        listener = socket.create_server(
            ("", port), family=socket.AF_INET6, dualstack_ipv6=True, reuse_port=False
        )
    else:
        listener = socket.create_server(("", port))
    listener.setblocking(False)
    return listener


def _address(address: Tuple[object, ...]) -> str:
    host, port = str(address[0]), address[1]
    if host.startswith("::ffff:"):
        host = host[len("::ffff:") :]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
