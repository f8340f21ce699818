"""Node 0's heartbeats, on a virtual clock over real loopback sockets: node 0 beats, each node
answers the beat it hears, a node that stops answering is lost, and a beat that comes late
because node 0's own loop was held up (spawning a thousand ranks, say) loses nobody."""

from __future__ import annotations

import select
import socket
from typing import Iterator, List, Optional

import pytest

from malaunch.events import Clock, EventLoop
from malaunch.job.protocol import (
    PING,
    LineReader,
    Message,
    derive_token,
    encode,
    new_nonce,
    proof,
    welcome_proof_ok,
)
from malaunch.job.server import ChannelServer
from malaunch.job.settings import JobSettings
from ports import Reservations


class VirtualClock(Clock):
    """Time that jumps to the next deadline instead of waiting for it."""

    def __init__(self) -> None:
        self.time = 1000.0

    def now(self) -> float:
        return self.time

    def block_for(self, timeout: Optional[float]) -> Optional[float]:
        if timeout is not None:
            self.time += timeout
        return 0.0


class Node:
    """Node 1's end, by hand: the handshake, then it answers beats only when told to."""

    def __init__(self, port: int, token: bytes) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.token = token
        self.reader = LineReader()

    def next(self) -> Message:
        while True:
            for message in self.reader.feed(self.sock.recv(65536)):
                return message

    def hello(self) -> str:
        challenge = self.next()
        ours = new_nonce()
        answer = proof(self.token, str(challenge["nonce"]), 1)
        self.sock.sendall(encode({"t": "hello", "node": 1, "proof": answer, "nonce": ours}))
        return ours

    def answer_beats(self) -> int:
        """Answer every beat that came (as ``malaunch.job.client`` does); how many. Loopback
        delivers in the kernel's own time: a beat sent is waited for, a second at most."""
        select.select([self.sock], [], [], 1.0)
        self.sock.setblocking(False)
        count = 0
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break  # node 0 closed the connection
                count += data.count(PING)
        except BlockingIOError:
            pass
        finally:
            self.sock.setblocking(True)
        if count:
            self.sock.sendall(PING)
        return count


class Harness:
    """Node 0's channel server on a virtual clock, the nodes lost, the sockets to close."""

    def __init__(self, port: int) -> None:
        self.clock = VirtualClock()
        self.loop = EventLoop(self.clock)
        token = derive_token(["beats"], 0)
        self.settings = JobSettings(0, 2, "127.0.0.1", port, token)
        self.lost: List[int] = []
        self.server = ChannelServer(
            self.loop, self.settings, lambda n, h: None, lambda n, m: None, self.lost.append
        )
        self.nodes: List[Node] = []

    def joined(self) -> Node:
        node = Node(self.settings.port, self.settings.token)
        self.nodes.append(node)
        self.loop.run_once()  # accept, challenge
        ours = node.hello()
        while 1 not in self.server.peers:
            self.loop.run_once()
        assert welcome_proof_ok(node.token, ours, node.next()["proof"])
        return node

    def beat(self, node: Node, answer: bool = True) -> int:
        """Run node 0's loop to its next beat (the clock jumps there, or not at all when the
        beat is overdue); the node answers the beats it heard, or not; how many it heard."""
        pending = self.server._beat  # the timer of node 0's next beat
        while self.server._beat is pending:
            self.loop.run_once()
        heard = node.answer_beats() if answer else 0
        if heard:  # node 0 reads the answer (once the kernel has delivered it)
            select.select([self.server.peers[1].sock], [], [], 1.0)
            self.loop.run_once()
        return heard

    def close(self) -> None:
        for node in self.nodes:
            node.sock.close()
        self.server.close()
        self.loop.close()


@pytest.fixture
def job(free_port: Reservations) -> Iterator[Harness]:
    harness = Harness(free_port())
    yield harness
    harness.close()


def test_a_node_that_answers_every_beat_is_never_lost(job: Harness) -> None:
    node = job.joined()
    assert all(job.beat(node) >= 1 for _ in range(20))  # beats came, every round
    assert job.lost == [] and 1 in job.server.peers


def test_a_node_that_stops_answering_is_lost_after_the_timeout(job: Harness) -> None:
    node = job.joined()
    job.beat(node)
    since = job.clock.time
    while not job.lost:
        job.beat(node, answer=False)
        assert job.clock.time - since < 60
    assert job.lost == [1]
    settings = job.settings
    assert settings.silence_timeout < job.clock.time - since
    assert job.clock.time - since <= settings.silence_timeout + 2 * settings.heartbeat_interval


def test_a_late_beat_after_node_0_was_held_up_loses_nobody(job: Harness) -> None:
    """Node 0's loop is held up for 30 s (six timeouts) right after a node answered: it sent
    no beat meanwhile, so the node had nothing to answer. The late beat loses nobody; the
    node answers it and stays."""
    node = job.joined()
    job.beat(node)
    job.clock.time += 30.0
    assert job.beat(node) >= 1  # the late beat came, and was answered
    assert all(job.beat(node) >= 1 for _ in range(10))
    assert job.lost == [] and 1 in job.server.peers
