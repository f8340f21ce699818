"""Many node launchers' ends of the job channel in one process: real sockets, the real
handshake and token, heartbeats at the launcher's interval, the real reports.

    node_swarm.py --port P --token HEX --hosts FILE --first I --count C --interval S

Speaks the job channel's protocol as ``malaunch.job.client`` does, for nodes I..I+C-1, each
from the address the host file (Volcano's ``worker.host``, one host a line) gives its node:
framing and proofs come from :mod:`malaunch.job.protocol`, so this is the real protocol,
not a mock of it. What a node launcher would do on a command, each node does at once: ``ready``
on ``prepare``, ``ended`` after a ``stop`` that restarts, its stack on ``capture``. A try to
join that fails is retried after the real client's delays (``busy``, a refused or timed-out
connect), so a burst of joins is served as it would be on a cluster.

Commands on stdin, one a line: ``go`` (every node dials node 0 now), ``fail NODE``,
``hang NODE`` (that node reports a failed rank, a silent rank), ``vanish FIRST COUNT`` (those
nodes close their connections at once, without ``bye``), ``replace FIRST COUNT`` (new launchers
for those vanished nodes dial node 0), ``status``, ``quit`` (``bye``, exit).
Events on stdout, one JSON object a line (times from ``time.time()``): ``joined`` once every
node is in, ``started``/``stopped`` once every node still here has heard that ``start``/
``stop``, ``sent`` for a report, ``status``, ``closed`` once node 0 has closed every connection.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import errno
import heapq
import json
import os
import resource
import selectors
import socket
import sys
import time
from typing import Any, Deque, Dict, List, Optional, Tuple

from malaunch.job.client import CONNECT_TIMEOUT, RETRY_DELAYS
from malaunch.job.protocol import (
    LineReader,
    Message,
    ProtocolError,
    encode,
    new_nonce,
    proof,
    welcome_proof_ok,
)

PING = encode({"t": "ping"})
FRAME = "all_reduce (collective.py:42)"  # where every rank waits, as py-spy would name it
STUCK = "read_batch (loader.py:7)"  # where the hung node's rank is


class Node:
    """One node launcher's connection to node 0."""

    def __init__(self, index: int, host: str) -> None:
        self.index = index
        self.host = host
        self.sock: Optional[socket.socket] = None
        self.reader = LineReader()
        self.state = "idle"  # connecting, challenged, welcomed, joined, gone
        self.nonce = ""  # ours, once the hello is sent
        self.challenge = ""  # node 0's
        self.tries = 0
        self.deadline = 0.0  # of the connect or handshake under way
        self.last_heard = 0.0
        self.attempt = -1
        self.prepared = False
        self.out = b""


class Swarm:
    def __init__(self, args: argparse.Namespace, hosts: List[str]) -> None:
        self.port = args.port
        self.token = bytes.fromhex(args.token)
        self.interval = args.interval
        self.timeout = args.timeout
        self.nodes = {i: Node(i, hosts[i]) for i in range(args.first, args.first + args.count)}
        self.selector = selectors.DefaultSelector()
        self.timers: List[Tuple[float, int, int]] = []  # (when, node, kind): 0 retry, 1 check,
        self.answer_after = args.answer_after  # 2 answer the challenge now
        self.beats: Deque[Tuple[float, int]] = collections.deque()  # (due, node), in order
        # (kind, attempt) -> node -> when it heard it; and, until said, how many nodes that
        # did not hear it are gone (they never will)
        self.heard: Dict[Tuple[str, int], Dict[int, float]] = collections.defaultdict(dict)
        self.unheard_gone: Dict[Tuple[str, int], int] = {}
        self.said: Dict[Tuple[str, int], bool] = {}
        self.final: Dict[Tuple[str, int], bool] = {}
        self.first_connect: Optional[float] = None
        self.counts: Dict[str, int] = collections.Counter()
        self.alive = len(self.nodes)  # nodes not gone
        self.running = True

    # -- events ------------------------------------------------------------------------

    def emit(self, event: str, **fields: Any) -> None:
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()

    def live(self) -> List[Node]:
        return [node for node in self.nodes.values() if node.state != "gone"]

    def note(self, node: Node, kind: str, attempt: int, final: bool = False) -> None:
        """Say ``started``/``stopped`` once every node still here has heard it."""
        key = (kind, attempt)
        if key not in self.heard:
            self.unheard_gone[key] = len(self.nodes) - self.alive
            self.final[key] = final
        self.heard[key].setdefault(node.index, time.time())
        self.check(key)

    def check(self, key: Tuple[str, int]) -> None:
        times = self.heard[key]
        if len(times) + self.unheard_gone[key] >= len(self.nodes) and not self.said.get(key):
            self.said[key] = True
            event = {"attempt": key[1], "count": len(times), "first": min(times.values())}
            self.emit(key[0], last=max(times.values()), final=self.final[key], **event)

    # -- joining -----------------------------------------------------------------------

    def dial(self, node: Node) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        with contextlib.suppress(OSError):  # not a local address: dial from the default one
            sock.bind((node.host, 0))
        if self.first_connect is None:
            self.first_connect = time.time()
        node.sock, node.state, node.reader, node.out = sock, "connecting", LineReader(), b""
        node.nonce = ""
        node.deadline = time.monotonic() + CONNECT_TIMEOUT
        code = sock.connect_ex(("127.0.0.1", self.port))
        if code not in (0, errno.EINPROGRESS):
            self.retry(node, f"connect: {os.strerror(code)}")
            return
        self.selector.register(sock, selectors.EVENT_WRITE, node)
        heapq.heappush(self.timers, (node.deadline, node.index, 1))

    def retry(self, node: Node, why: str) -> None:
        """A failed try: close, wait the real client's delay, dial again."""
        self.counts[why.split(":", maxsplit=1)[0]] += 1
        self.close(node)
        node.state = "idle"
        node.tries += 1
        delay = RETRY_DELAYS[min(node.tries - 1, len(RETRY_DELAYS) - 1)]
        heapq.heappush(self.timers, (time.monotonic() + delay, node.index, 0))

    def close(self, node: Node) -> None:
        if node.sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(node.sock)
            node.sock.close()
            node.sock = None

    def connected(self, node: Node) -> None:
        assert node.sock is not None
        code = node.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self.retry(node, f"connect: {os.strerror(code)}")
            return
        node.state = "challenged"
        node.deadline = time.monotonic() + CONNECT_TIMEOUT + 5.0  # the handshake's reads
        self.selector.modify(node.sock, selectors.EVENT_READ, node)

    def handshake(self, node: Node, message: Message) -> None:
        kind = message.get("t")
        if kind == "busy":
            self.retry(node, "busy")
        elif node.state == "challenged" and kind == "challenge":
            node.challenge = str(message.get("nonce"))
            node.state = "welcomed"
            if self.answer_after:  # a node slow to answer (a loaded machine, a long way)
                heapq.heappush(self.timers, (time.monotonic() + self.answer_after, node.index, 2))
            else:
                self.hello(node)
        elif node.state == "welcomed" and kind == "welcome":
            if not welcome_proof_ok(self.token, node.nonce, message.get("proof")):
                self.retry(node, "impostor")
                return
            node.state, node.last_heard = "joined", time.monotonic()
            self.beats.append((node.last_heard + self.interval, node.index))
            self.counts["joined"] += 1
            if self.counts["joined"] == len(self.nodes):
                self.emit("joined", count=len(self.nodes), first_connect=self.first_connect)
        else:
            self.retry(node, f"unexpected {kind!r}")

    def hello(self, node: Node) -> None:
        node.nonce = new_nonce()
        answer = proof(self.token, node.challenge, node.index)
        hello = {"t": "hello", "node": node.index, "proof": answer, "nonce": node.nonce}
        self.send(node, encode({**hello, "host": node.host}))

    # -- joined ------------------------------------------------------------------------

    def command(self, node: Node, message: Message) -> None:
        """What a node launcher does on node 0's command, without processes to run."""
        kind = message.get("t")
        attempt = message.get("attempt")
        if kind == "ping":
            self.send(node, PING)  # node 0 beats, every node answers (malaunch.job.client)
            return
        if kind == "prepare":
            number = -1 if not node.prepared else node.attempt
            node.prepared = True
            self.report(node, {"t": "ready", "attempt": number})
        elif kind == "start" and isinstance(attempt, int):
            node.attempt = attempt
            self.note(node, "started", attempt)
        elif kind == "stop" and isinstance(attempt, int):
            final = message.get("final", True) is not False
            self.note(node, "stopped", attempt, final)
            if not final:
                self.report(node, {"t": "ended", "attempt": attempt})
        elif kind == "capture" and isinstance(attempt, int):
            frame = STUCK if (message.get("hang") or {}).get("node") == node.index else FRAME
            rank = {"rank": node.index, "role": "worker", "frames": [frame], "method": "py-spy"}
            self.report(node, {"t": "stacks", "attempt": attempt, "ranks": [rank]})
        elif kind == "finish" and isinstance(attempt, int):
            self.note(node, "finished", attempt, True)

    def report(self, node: Node, message: Message) -> None:
        self.send(node, encode(message))

    def send(self, node: Node, data: bytes) -> None:
        if node.sock is None:
            return
        node.out += data
        try:
            sent = node.sock.send(node.out)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.gone(node, "send")
            return
        node.out = node.out[sent:]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if node.out else 0)
        self.selector.modify(node.sock, events, node)

    def readable(self, node: Node) -> None:
        assert node.sock is not None
        try:
            data = node.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if node.state == "joined":
                self.gone(node, "closed by node 0")
            else:
                self.retry(node, "closed early")
            return
        node.last_heard = time.monotonic()
        try:
            for message in node.reader.feed(data):
                if node.state == "joined":
                    self.command(node, message)
                else:
                    self.handshake(node, message)
                if node.sock is None:
                    return
        except ProtocolError:
            self.gone(node, "protocol")

    def gone(self, node: Node, why: str) -> None:
        if node.state == "gone":
            return
        self.close(node)
        node.state = "gone"
        self.counts[why] += 1
        self.alive -= 1
        for key in [k for k in self.heard if not self.said.get(k)]:
            if node.index not in self.heard[key]:
                self.unheard_gone[key] += 1
                self.check(key)
        if not self.alive:
            self.emit("closed", count=len(self.nodes), last=time.time(), why=dict(self.counts))

    # -- the loop ----------------------------------------------------------------------

    def beat(self, now: float) -> None:
        """A node that heard nothing from node 0 for the timeout has lost it, as the client
        (checked at each node's interval; they joined in order: the deque stays sorted)."""
        while self.beats and self.beats[0][0] <= now:
            _, index = self.beats.popleft()
            node = self.nodes[index]
            if node.state != "joined":
                continue
            if now - node.last_heard > self.timeout:
                self.gone(node, "node 0 silent")
                continue
            self.beats.append((now + self.interval, index))

    def due(self, now: float) -> None:
        while self.timers and self.timers[0][0] <= now:
            _, index, kind = heapq.heappop(self.timers)
            node = self.nodes[index]
            if kind == 0 and node.state == "idle":
                self.dial(node)
            elif kind == 1 and node.state in ("connecting", "challenged", "welcomed"):
                if now >= node.deadline:
                    self.retry(node, "timed out")
                else:
                    heapq.heappush(self.timers, (node.deadline, index, 1))
            elif kind == 2 and node.state == "welcomed" and not node.nonce:
                self.hello(node)

    def run(self) -> None:
        self.selector.register(sys.stdin.fileno(), selectors.EVENT_READ, None)
        self.emit("ready", count=len(self.nodes))
        while self.running:
            now = time.monotonic()
            wake = [self.beats[0][0]] if self.beats else []
            wake += [self.timers[0][0]] if self.timers else []
            timeout = max(0.0, min(wake) - now) if wake else None
            for key, events in self.selector.select(timeout):
                node = key.data
                if node is None:
                    self.stdin()
                elif node.sock is None:
                    continue
                elif node.state == "connecting":
                    self.connected(node)
                elif events & selectors.EVENT_WRITE and node.out:
                    self.send(node, b"")
                else:
                    self.readable(node)
            now = time.monotonic()
            self.due(now)
            self.beat(now)

    def stdin(self) -> None:
        words = sys.stdin.readline().split()
        if not words or words[0] == "quit":
            for node in self.live():
                if node.state == "joined":
                    self.report(node, {"t": "bye"})
                self.close(node)
            self.running = False
        elif words[0] == "go":
            for node in self.nodes.values():
                self.dial(node)
        elif words[0] in ("fail", "hang") and int(words[1]) in self.nodes:
            self.misbehave(self.nodes[int(words[1])], words[0])
        elif words[0] in ("vanish", "replace"):
            first, count = int(words[1]), int(words[2])
            for index in range(first, first + count):
                if index not in self.nodes:
                    continue
                if words[0] == "vanish":
                    self.gone(self.nodes[index], "vanished")
                elif self.nodes[index].state == "gone":
                    self.replace(index)
            self.emit(words[0], first=first, count=count, at=time.time())
        elif words[0] == "status":
            states = collections.Counter(node.state for node in self.nodes.values())
            self.emit("status", states=dict(states), counts=dict(self.counts))

    def replace(self, index: int) -> None:
        """A new launcher for a vanished node (a pod created again): it dials node 0 anew."""
        self.nodes[index] = Node(index, self.nodes[index].host)
        self.alive += 1
        self.counts["joined"] -= 1  # joins again
        self.dial(self.nodes[index])

    def misbehave(self, node: Node, how: str) -> None:
        at = time.time()
        if how == "fail":
            failure = {"kind": "exit", "rank": node.index, "role": "worker", "code": 3}
            self.report(node, {"t": "failed", "attempt": node.attempt, "failure": failure})
        else:
            hang = {"rank": node.index, "role": "worker", "seconds_silent": 60.0}
            self.report(node, {"t": "hang", "attempt": node.attempt, "hang": {**hang}})
        self.emit("sent", what=how, node=node.index, at=at)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True, help="the job's token, hex")
    parser.add_argument("--hosts", required=True, help="one host a line; line i is node i")
    parser.add_argument("--first", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--answer-after", type=float, default=0.0, help="delay each hello")
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < args.count + 64:
        raise SystemExit(f"node_swarm: RLIMIT_NOFILE {hard} < {args.count + 64}")
    with open(args.hosts, encoding="utf-8") as handle:
        hosts = handle.read().split()
    Swarm(args, hosts).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
