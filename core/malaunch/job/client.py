"""The end of the job channel on nodes 1..N-1: reach node 0, prove the token and have node 0
prove it in turn, report, obey.

Node launchers start in any order and node 0's may come up last, so :meth:`ChannelClient.join`
retries until ``--wait-timeout``, saying what it waits for (:mod:`malaunch.progress`). Once
joined, the client and node 0 exchange a heartbeat every fifth of the heartbeat timeout; end of
file without ``bye``, or silence past the timeout, means node 0 is lost.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import time
from typing import Callable, Counter, Optional

from malaunch.errors import PeerError
from malaunch.events import EventLoop, Timer
from malaunch.job.protocol import (
    PING,
    SEND_TIMEOUT,
    LineReader,
    Message,
    ProtocolError,
    new_nonce,
    proof,
    send,
    welcome_proof_ok,
)
from malaunch.job.settings import JobSettings
from malaunch.log import logger
from malaunch.progress import Waiting
from malaunch.wording import plural

CONNECT_TIMEOUT = 2.0
MIN_STEP = 0.1  # the shortest connect or read of the handshake, even past the deadline
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0)  # then 1 s between attempts
RECV_CHUNK = 65536
POLL = 0.1  # seconds between two looks at the launcher's signals while an answer is awaited


class AuthenticationFailed(ProtocolError):
    """The server on the job port answered, but did not prove it holds this job's token."""


class ClosedEarly(ProtocolError):
    """Node 0 closed the connection before the handshake was through: it was busy with other
    connections (a flood of them on the job port), or it is going away."""


class Interrupted(Exception):
    """A signal to the launcher came while node 0's answer was awaited: the join ends."""


class Causes:
    """What each try to join ran into, so that the final error names what happened most, not
    only the last socket error (a node kept out by a flood saw "connection refused" last,
    once node 0 had given up)."""

    def __init__(self) -> None:
        self.tries = 0
        self.last = "no answer yet"
        self.impostor = False  # the last answer came from a server that failed authentication
        self.counts: Counter[str] = collections.Counter()

    def add(self, exc: BaseException) -> None:
        self.tries += 1
        self.last = str(exc) or type(exc).__name__
        self.impostor = isinstance(exc, AuthenticationFailed)
        self.counts[_cause(exc)] += 1

    def tally(self) -> str:
        """``node 0 closed 30 connection attempts before the handshake, 2 were refused``."""
        parts = []
        for cause, count in self.counts.most_common():
            parts.append(CAUSES[cause].format(attempts=plural(count, "connection attempt")))
        return ", ".join(parts)

    def message(self, where: str, settings: JobSettings) -> str:
        """The one error line when the wait is over."""
        waited = f"--wait-timeout {settings.wait_timeout:g}s"
        if self.impostor:
            return (
                f"the server at {where} (job channel, --job-port) failed authentication: "
                f"{self.last}; gave up after {waited}"
            )
        tally = f"; of {plural(self.tries, 'try')}: {self.tally()}" if self.tries else ""
        if self.counts["closed"]:
            # The cause seen, named first: a flood keeps a node out, not a missing launcher.
            return (
                f"node 0's launcher at {where} (job channel, --job-port) did not let node "
                f"{settings.node_rank} in within {settings.wait_timeout:g}s{tally} (another "
                "program floods the job port, or node 0 was going away); last error: "
                f"{self.last}"
            )
        # The usual causes, named: a Service in front of node 0 (MindX, some operators)
        # forwards only the ports its pod declares.
        return (
            f"node 0's launcher at {where} (job channel, --job-port) did not accept node "
            f"{settings.node_rank} within {settings.wait_timeout:g}s: {self.last}{tally} (is "
            "malaunch running on node 0, and does every Service or firewall between the nodes "
            f"pass port {settings.port}? --no-job-channel runs without the channel)"
        )


CAUSES = {
    "closed": "node 0 closed {attempts} before the handshake",
    "refused": "{attempts} refused (nothing listens there)",
    "timeout": "{attempts} timed out",
    "rejected": "node 0 turned down {attempts} after the hello",
    "impostor": "{attempts} answered by a server without the token",
    "other": "{attempts} failed otherwise",
}


def _cause(exc: BaseException) -> str:
    if isinstance(exc, ClosedEarly):
        return "closed"
    if isinstance(exc, AuthenticationFailed):
        return "impostor"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(exc, ProtocolError) and str(exc).startswith("node 0 closed the connection:"):
        return "rejected"
    return "other"


class ChannelClient:
    """A joined connection to node 0's launcher."""

    def __init__(
        self,
        loop: EventLoop,
        settings: JobSettings,
        on_command: Callable[[Message], None],
        on_lost: Callable[[str], None],
    ) -> None:
        self.loop = loop
        self.settings = settings
        self.on_command = on_command
        self.on_lost = on_lost
        self.sock: Optional[socket.socket] = None
        self.reader = LineReader()
        self.last_seen = 0.0
        self.lost = False
        self.job_over = False  # node 0 said finish or a final stop: its leaving is no loss
        self._beat: Optional[Timer] = None
        self._interrupted: Callable[[], bool] = lambda: False

    def join(
        self,
        interrupted: Callable[[], bool],
        what: Optional[str] = None,
        failure: Optional[Message] = None,
    ) -> None:
        """Connect and authenticate, retrying until ``wait_timeout``; each try resolves node
        0's name anew (a Service or headless DNS name follows a replaced pod).

        ``interrupted`` is asked between attempts, and every :data:`POLL` seconds while an
        answer is awaited (a signal to the launcher ends the wait, however slow node 0 is);
        ``what`` says what the wait is for (default: node 0's launcher at HOST:PORT);
        ``failure``: why this node cannot start, told in its hello (node 0 then ends the job).
        :raises PeerError: (exit 69) node 0's launcher did not accept us in time.
        """
        settings = self.settings
        where = f"{settings.host}:{settings.port}"
        deadline = time.monotonic() + settings.wait_timeout
        causes = Causes()
        waiting = Waiting(what or f"node 0's launcher at {where} (job channel)")
        self._interrupted = interrupted
        try:
            while not interrupted():
                try:
                    self.sock = self._handshake(deadline, failure)
                    break
                except Interrupted:
                    break
                except (OSError, ProtocolError, ValueError) as exc:
                    causes.add(exc)
                now = time.monotonic()
                if now >= deadline:
                    raise PeerError(causes.message(where, settings))
                waiting.update(causes.last, settings.wait_timeout)
                delay = RETRY_DELAYS[min(causes.tries - 1, len(RETRY_DELAYS) - 1)]
                time.sleep(min(delay, max(0.0, deadline - now)))
        finally:
            waiting.done()
        if self.sock is None:
            return
        self.last_seen = self.loop.now()
        self.loop.add_reader(self.sock.fileno(), self._readable)
        self._beat = self.loop.call_later(settings.heartbeat_interval, self._heartbeat)
        logger.debug(f"job channel: node {settings.node_rank} joined node 0 at {where}")
        self._dispatch(b"")  # commands that came in the same packet as the welcome

    def _handshake(self, deadline: float, failure: Optional[Message] = None) -> socket.socket:
        """One connection and authentication, given up at ``deadline`` (``time.monotonic``):
        a node 0 that does not answer, or answers slowly, must not stretch --wait-timeout."""
        settings = self.settings
        budget = _budget(deadline, CONNECT_TIMEOUT)
        sock = socket.create_connection((settings.host, settings.port), timeout=budget)
        try:
            reader = LineReader()
            try:
                challenge = _next_message(sock, reader, deadline, self._interrupted)
            except ConnectionError as exc:
                raise ClosedEarly("node 0 closed the connection before the handshake") from exc
            nonce = challenge.get("nonce")
            if challenge.get("t") == "busy":
                raise ClosedEarly("node 0 closed the connection before the handshake (busy)")
            if challenge.get("t") != "challenge" or not isinstance(nonce, str):
                msg = f"not a malaunch job channel (got {challenge.get('t')!r})"
                raise ProtocolError(msg)
            node, ours = settings.node_rank, new_nonce()
            answer = proof(settings.token, nonce, node)
            hello = {"t": "hello", "node": node, "proof": answer, "nonce": ours}
            if settings.own_host:
                hello["host"] = settings.own_host  # where a replacement came from
            if failure is not None:
                hello["failure"] = failure
            send(sock, hello)
            try:
                welcome = _next_message(sock, reader, deadline, self._interrupted)
            except ConnectionError as exc:
                msg = (
                    "node 0 closed the connection: another job's launcher, or the nodes "
                    "disagree on the job (id, node count, world size, rendezvous port) or "
                    "on --job-secret"
                )
                raise ProtocolError(msg) from exc
            if welcome.get("t") == "busy":
                raise ClosedEarly("node 0 closed the connection before the handshake (busy)")
            if welcome.get("t") != "welcome":
                msg = f"expected a welcome, got {welcome.get('t')!r}"
                raise ProtocolError(msg)
            # Nothing the server sent is trusted before it has proved the token in turn:
            # whatever took the job port before node 0's launcher could bind it must not be
            # able to stop or finish this node.
            if not welcome_proof_ok(settings.token, ours, welcome.get("proof")):
                msg = (
                    "its welcome does not prove this job's token (another program holds the "
                    "job port, or it serves another job)"
                )
                raise AuthenticationFailed(msg)
            self.reader = reader
            sock.settimeout(SEND_TIMEOUT)
            return sock
        except BaseException:
            sock.close()
            raise

    def send(self, message: Message) -> None:
        if self.sock is None or self.lost:
            return
        try:
            send(self.sock, message)
        except OSError as exc:
            self._lose(f"cannot send to node 0: {exc}")

    def _readable(self) -> None:
        assert self.sock is not None
        try:
            data = self.sock.recv(RECV_CHUNK)
        except OSError as exc:
            self._lose(f"connection error: {exc}")
            return
        if not data:
            self._lose("node 0's launcher closed the connection")
            return
        self.last_seen = self.loop.now()
        self._dispatch(data)

    def _dispatch(self, data: bytes) -> None:
        pinged = False
        try:
            for message in self.reader.feed(data):
                if message["t"] == "ping":
                    pinged = True
                else:
                    self.on_command(message)
        except ProtocolError as exc:
            self._lose(f"protocol violation: {exc}")
        if pinged and self.sock is not None and not self.lost:
            # The answer to node 0's beat is this node's: the answers of every node reach node 0
            # together, read in a few wake-ups instead of one for each node at its own time.
            try:
                self.sock.sendall(PING)
            except OSError as exc:
                self._lose(f"cannot send to node 0: {exc}")
        while self.reader.dropped:
            why = self.reader.dropped.pop(0)
            logger.warning(f"job channel: dropped a malformed message from node 0: {why}")

    def _heartbeat(self) -> None:
        """Node 0 beats, this node answers (:meth:`_dispatch`); here, only whether node 0 has
        been silent for too long."""
        if self.lost or self.sock is None:
            return
        silent = self.loop.now() - self.last_seen
        if silent > self.settings.silence_timeout:
            self._lose(f"no heartbeat from node 0 for {silent:.1f}s")
            return
        self._beat = self.loop.call_later(self.settings.heartbeat_interval, self._heartbeat)

    def _lose(self, reason: str) -> None:
        if self.lost:
            return
        self.lost = True
        self._close()
        if self.job_over:
            # Its job is over (the chief succeeded, say) while this node still stops its own
            # processes: node 0 may well be gone first.
            logger.debug(f"job channel: node 0's launcher left after the job's end ({reason})")
        else:
            logger.error(f"job channel: lost node 0's launcher ({reason})")
        self.on_lost(reason)

    def _close(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
        if self.sock is not None:
            self.loop.remove_reader(self.sock.fileno())
            self.sock.close()
            self.sock = None

    def close(self) -> None:
        """Leave: say ``bye`` so that node 0 does not count this as a lost node. Node 0 may
        have left first (its job is over too): that is no loss."""
        if self.sock is not None and not self.lost:
            with contextlib.suppress(OSError):
                send(self.sock, {"t": "bye"})
        self.lost = True
        self._close()


def _budget(deadline: float, most: float) -> float:
    """Seconds one blocking step of the handshake may take: what is left before
    ``deadline``, at most ``most``; a short minimum, so that ``--wait-timeout 0`` still makes
    one attempt."""
    return min(most, max(MIN_STEP, deadline - time.monotonic()))


def _next_message(
    sock: socket.socket, reader: LineReader, deadline: float, interrupted: Callable[[], bool]
) -> Message:
    """Block for one message during the handshake, until ``deadline`` at the latest (a
    server that sends a byte now and then cannot keep this node waiting), asking
    ``interrupted`` every :data:`POLL` seconds (a silent server cannot hold a signal up for
    the read's whole timeout).

    :raises Interrupted: ``interrupted()`` said so.
    """
    while True:
        ends = time.monotonic() + _budget(deadline, SEND_TIMEOUT)
        while True:
            sock.settimeout(max(0.001, min(POLL, ends - time.monotonic())))
            try:
                data = sock.recv(RECV_CHUNK)
                break
            except socket.timeout:
                if interrupted():
                    raise Interrupted from None
                if time.monotonic() >= ends:
                    raise
        if not data:
            msg = "connection closed"
            raise ConnectionError(msg)
        for message in reader.feed(data):
            return message
