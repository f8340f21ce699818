"""Node 0's end of the job channel: accept the other node launchers, authenticate them, pass
their reports on, send them commands, and notice when one disappears.

A connection is a *stranger* until it answers the challenge (see :mod:`malaunch.job.protocol`)
within :data:`HANDSHAKE_TIMEOUT`; a stranger that sends anything else, or too much, is closed
with a warning and changes nothing. At most :data:`MAX_STRANGERS` wait at once; admission is
fair (:mod:`malaunch.job.admission`): when the room is full, a stranger that has had
:data:`MIN_CHANCE` to answer makes room (the oldest of the address holding the most), and
until one has, new connections wait in the listen backlog, in order, so a node with the token
gets in behind any flood. The warnings strangers cause are throttled
(:mod:`malaunch.job.throttle`): a flood of connections gives a few lines with counts, not a
line each. An
authenticated node that closes its connection without saying ``bye``, or stays silent for
the heartbeat timeout, is *lost*: it counts as that node failing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import socket
import time
from typing import Callable, Dict, Optional, Tuple

from malaunch.events import EventLoop, Timer
from malaunch.job.admission import WaitingRoom
from malaunch.job.protocol import (
    PING,
    PROTOCOL_VERSION,
    SEND_TIMEOUT,
    LineReader,
    Message,
    ProtocolError,
    encode,
    new_nonce,
    nonce_ok,
    proof_ok,
    welcome_proof,
)
from malaunch.job.replacement import host_of
from malaunch.job.settings import JobSettings
from malaunch.job.sockets import Outbox, listen, pending, source_host, source_text
from malaunch.job.throttle import Throttle
from malaunch.log import logger

HANDSHAKE_TIMEOUT = 3.0  # a node answers within a round trip; a silent stranger goes then
MAX_STRANGERS = 256  # plus one for each node that has not joined: see _room_size
# Each stranger's guaranteed time to answer before it may be evicted: many round trips, yet
# short enough that 256 slots admit about 1,000 connections a second behind a flood.
MIN_CHANCE = 0.25
ACCEPT_BATCH = 32  # accepts per readable event: then the handshakes already waiting get read
CLOSE_FLUSH = 1.0  # seconds all peers share, at close, to take what still waits for them
OUT_OF_FILES_PAUSE = 0.1  # seconds without accepting when the launcher is out of descriptors
RECV_CHUNK = 65536
MAX_WARNINGS = 5  # per peer: a babbling node must not flood the launcher's own log
SHOWN_REJECTIONS = 5  # rejected strangers named per throttle window; the rest are counted


@dataclasses.dataclass
class _Connection:
    sock: socket.socket
    address: str
    reader: LineReader
    host: str  # the source address without the port: what admission counts by
    nonce: str = ""
    node: Optional[int] = None
    last_seen: float = 0.0
    said_bye: bool = False
    timer: Optional[Timer] = None
    warnings: int = 0
    outbox: Outbox = dataclasses.field(init=False)  # what waits to be sent to it


def connections_held(nnodes: int) -> int:
    """The most connections node 0 holds at once: every other node, and the strangers its
    waiting room lets wait (the room shrinks as nodes join: together they stay this many)."""
    return nnodes - 1 + MAX_STRANGERS


class ChannelServer:
    """Listens on ``settings.port`` on every interface; nodes 1..N-1 connect to it."""

    def __init__(
        self,
        loop: EventLoop,
        settings: JobSettings,
        on_join: Callable[[int, Optional[str]], None],
        on_report: Callable[[int, Message], None],
        on_lost: Callable[[int], None],
        *,
        listener: Optional[socket.socket] = None,
    ) -> None:
        self.loop = loop
        self.settings = settings
        self.on_join = on_join
        self.on_report = on_report
        self.on_lost = on_lost
        # Bound before anything that can fail on node 0 (listen()): the nodes that came
        # meanwhile wait in the backlog, and hear why if the job ends before its start.
        self.listener = listener if listener is not None else listen(settings.port)
        self.strangers: Dict[int, _Connection] = {}
        self.peers: Dict[int, _Connection] = {}
        self.room: WaitingRoom[int] = WaitingRoom(self._room_size(), MIN_CHANCE)
        self.closed = False
        self.paused: Optional[Timer] = None  # accepting resumes when it fires
        self.turned_away = Throttle(
            loop,
            burst=1,
            summary=lambda count, seconds: (
                f"job channel: too many unauthenticated connections ({self.room.capacity} "
                f"waiting): closed {count} more of the oldest in {seconds:.0f}s"
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
        """Send ``message`` to every node: encoded once, whatever the node count."""
        data = encode(message)
        for peer in list(self.peers.values()):
            peer.outbox.write(data)

    def send(self, node: int, message: Message) -> None:
        peer = self.peers.get(node)
        if peer is not None:
            peer.outbox.write(encode(message))

    # -- accepting and handshakes ---------------------------------------------------------

    def _accept(self) -> None:
        """Accept what the backlog holds, a batch at a time, making room fairly."""
        for _ in range(ACCEPT_BATCH):
            if self.room.full() and not self._make_room():
                return
            try:
                sock, address = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # The connection stays queued; accepting again at once would spin.
                    self.turned_away.warn(f"job channel: cannot accept a connection: {exc}")
                    self._pause(self.loop.now() + OUT_OF_FILES_PAUSE)
                return
            self._greet(sock, address)

    def _make_room(self) -> bool:
        """Close one stranger that has had its chance; else pause accepting until one has."""
        now = self.loop.now()
        key = self.room.victim(now)
        if key is None:
            when = self.room.next_chance_over()
            self._pause(now + MIN_CHANCE if when is None else when)
            return False
        conn = self.strangers[key]
        if pending(conn.sock):
            self._readable(conn)  # its hello came in this very round: read it, do not evict it
        if conn.node is None and key in self.room:
            silent = now - self.room.waiting[key][1]
            self.turned_away.warn(
                f"job channel: too many unauthenticated connections ({len(self.room)} waiting): "
                f"closed {conn.address}, silent for {silent:.1f}s"
            )
            self._forget(conn)
            with contextlib.suppress(OSError):  # a hint for a node's error, nothing it trusts
                conn.sock.send(b'{"t":"busy"}\n')
            self._close(conn)
        return not self.room.full()

    def _room_size(self) -> int:
        """Room for :data:`MAX_STRANGERS` strangers, plus one for each node still expected: a
        whole job's nodes connecting at once are all let in to answer, none taken for a flood
        and closed. Peers and strangers together stay within nodes - 1 + MAX_STRANGERS."""
        return MAX_STRANGERS + max(0, self.settings.nnodes - 1 - len(self.peers))

    def _pause(self, until: float) -> None:
        """Leave new connections in the backlog (in order) until ``until``."""
        if self.paused is None and not self.closed:
            self.loop.remove_reader(self.listener.fileno())
            self.paused = self.loop.call_at(until, self._resume)

    def _resume(self) -> None:
        self.paused = None
        if not self.closed:
            self.loop.add_reader(self.listener.fileno(), self._accept)
            self._accept()

    def _greet(self, sock: socket.socket, address: Tuple[object, ...]) -> None:
        """Challenge a new connection and give it a place in the waiting room."""
        sock.setblocking(False)  # here as for every connection: see malaunch.job.sockets
        conn = _Connection(sock, source_text(address), LineReader(), source_host(address))
        conn.nonce = new_nonce()
        challenge = {"t": "challenge", "nonce": conn.nonce, "version": PROTOCOL_VERSION}
        try:
            sock.send(encode(challenge))  # an empty socket buffer takes it whole
        except OSError:
            sock.close()
            return
        conn.outbox = Outbox(self.loop, sock, lambda why: self._unsendable(conn, why))
        self.strangers[sock.fileno()] = conn
        self.room.add(sock.fileno(), conn.host, self.loop.now())
        conn.timer = self.loop.call_later(HANDSHAKE_TIMEOUT, lambda: self._timeout(conn))
        self.loop.add_reader(sock.fileno(), lambda: self._readable(conn))

    def _forget(self, conn: _Connection) -> None:
        """No longer a stranger (joined, rejected, evicted or gone)."""
        key = conn.sock.fileno()
        if self.strangers.get(key) is conn:
            del self.strangers[key]
            self.room.remove(key)
        if conn.timer is not None:
            conn.timer.cancel()

    def _timeout(self, conn: _Connection) -> None:
        if conn.node is None and self.strangers.get(conn.sock.fileno()) is conn:
            if pending(conn.sock):
                self._readable(conn)  # its hello waits behind a busy round: read it first
            if conn.node is None and self.strangers.get(conn.sock.fileno()) is conn:
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
            self._forget(conn)
            conn.node, conn.last_seen = node, self.loop.now()
            self.peers[node] = conn
            self.room.capacity = self._room_size()
            # The node trusts nothing from us before this proof (mutual authentication).
            welcome = {"t": "welcome", "proof": welcome_proof(self.settings.token, str(theirs))}
            conn.outbox.write(encode(welcome))
            if self.peers.get(node) is not conn:
                return  # the welcome could not be sent: dropped
            logger.debug(f"job channel: node {node} joined from {conn.address}")
            failure = message.get("failure")
            if isinstance(failure, dict):
                # A node that could not start says why in its hello: the job ends before the
                # "prepare" its join would bring (and a stage-in it would begin elsewhere).
                self.on_report(node, {"t": "failed", "attempt": -1, "failure": failure})
            self.on_join(node, host_of(message))

    def _reject(self, conn: _Connection, why: str) -> None:
        self.rejections.warn(f"job channel: rejected a connection from {conn.address}: {why}")
        self._forget(conn)
        self._close(conn)

    # -- reading --------------------------------------------------------------------------

    def _readable(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(RECV_CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:
            self._closed(conn, f"connection error: {exc}")
            return
        if not data:
            self._closed(conn, "connection closed")
        elif data == PING and conn.node is not None and not conn.reader.buffer:
            conn.last_seen = self.loop.now()  # most of what node 0 reads: no parsing needed
        else:
            self._received(conn, data)

    def _closed(self, conn: _Connection, reason: str) -> None:
        if conn.node is None:
            self._forget(conn)
            self._close(conn)
        else:
            self._drop(conn, reason)

    def _received(self, conn: _Connection, data: bytes) -> None:
        try:
            for message in conn.reader.feed(data, stop_at_drop=conn.node is None):
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
                self._reject(conn, why)
                return
            conn.warnings += 1
            if conn.warnings <= MAX_WARNINGS:
                logger.warning(
                    f"job channel: dropped a malformed message from node {conn.node}: {why}"
                )

    # -- liveness -------------------------------------------------------------------------

    def _heartbeat(self) -> None:
        """Beat every node; one that has not answered for the timeout is lost. A node only
        answers beats, so when this beat comes late (node 0's own loop was held up, and sent
        none), silence says nothing of the nodes: they are judged from the next beat on."""
        if self.closed:
            return
        now = self.loop.now()
        judged = now - self._beat.when <= self.settings.heartbeat_interval
        timeout = self.settings.silence_timeout
        for peer in list(self.peers.values()):
            silent, stuck = now - peer.last_seen, peer.outbox.waited(now)
            if judged and silent > timeout:
                self._drop(peer, f"no heartbeat for {silent:.1f}s")
            elif judged and stuck > SEND_TIMEOUT:
                self._unsendable(peer, f"it took nothing for {stuck:.1f}s")
            else:
                peer.outbox.write(PING)
        self._beat = self.loop.call_later(self.settings.heartbeat_interval, self._heartbeat)

    def _unsendable(self, conn: _Connection, why: str) -> None:
        self._drop(conn, f"cannot send to node {conn.node}: {why}")

    def _drop(self, conn: _Connection, reason: str) -> None:
        node = conn.node
        if node is None or self.peers.get(node) is not conn:
            return
        del self.peers[node]
        self.room.capacity = self._room_size()
        self._close(conn)
        if conn.said_bye:
            logger.debug(f"job channel: node {node} left")
            return
        logger.error(f"job channel: lost node {node}'s launcher ({reason})")
        self.on_lost(node)

    def _close(self, conn: _Connection) -> None:
        conn.outbox.close()
        self.loop.remove_reader(conn.sock.fileno())
        conn.sock.close()

    def close(self) -> None:
        """Stop listening and close every connection (the peers see end of file)."""
        self.closed = True
        self._beat.cancel()
        if self.paused is not None:
            self.paused.cancel()
        self.turned_away.close()
        self.rejections.close()
        # What still waits (a last stop for a node slow to read) gets a short, shared while.
        deadline = time.monotonic() + CLOSE_FLUSH
        for conn in self.peers.values():
            conn.outbox.drain(deadline)
        for conn in [*self.strangers.values(), *self.peers.values()]:
            if conn.timer is not None:
                conn.timer.cancel()
            self._close(conn)
        self.strangers.clear()
        self.peers.clear()
        self.room = WaitingRoom(MAX_STRANGERS, MIN_CHANCE)
        self.loop.remove_reader(self.listener.fileno())
        self.listener.close()
