"""The job channel's wire format: bounded JSON lines, a shared token, a challenge handshake.

Every message is one JSON object on one line (UTF-8, ``\\n``-terminated) with its type in
``"t"``. A line longer than :data:`MAX_MESSAGE` is a protocol violation (the connection is
closed); a line that is not a JSON object is dropped with a warning. Nothing here does I/O
beyond the socket calls of :class:`LineReader` and :func:`send`.

Authentication is mutual. Node 0 sends a random nonce; a node proves it knows the job's
token by answering HMAC-SHA256(token, nonce + node index), with a random nonce of its own;
node 0's ``welcome`` proves the token over that nonce in turn, and a node trusts no command
before it has checked that proof. The token is derived by every node from what the job shares
(see :func:`malaunch.job.settings.job_identity`, the job port and ``--job-secret``), so a
launcher of another job, a port scanner or a stray ``nc`` cannot stop this job, a program that
took the job port first cannot pose as node 0, and the token itself never crosses the wire.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import socket
from typing import Any, Dict, Iterator, List, Optional, Sequence

PROTOCOL_VERSION = 2  # 2: mutual authentication (the welcome proves the token)
MAX_MESSAGE = 64 * 1024  # bytes per line; the largest real message (stack signatures) is ~10 KiB
MAX_NONCE = 128  # hex digits
SEND_TIMEOUT = 5.0  # a peer that does not take a small message in this time is gone

Message = Dict[str, Any]


class ProtocolError(Exception):
    """The peer broke the protocol badly enough that the connection must close."""


def derive_token(identity: Sequence[object], port: int, secret: str = "") -> bytes:
    """The job's shared key: the same on every node of one job, different for another job.

    ``identity`` is what every node of the job sees alike (JSON values only).
    """
    material = json.dumps(
        ["malaunch-job", PROTOCOL_VERSION, list(identity), port, secret],
        separators=(",", ":"),
    )
    return hashlib.sha256(material.encode()).digest()


def new_nonce() -> str:
    return secrets.token_hex(16)


def nonce_ok(nonce: object) -> bool:
    """A nonce as a peer may send it: a short hex string (nothing else is ever hashed)."""
    return (
        isinstance(nonce, str)
        and 16 <= len(nonce) <= MAX_NONCE
        and all(c in "0123456789abcdef" for c in nonce)
    )


def proof(token: bytes, nonce: str, node: int) -> str:
    """What node ``node`` answers to ``nonce``."""
    return hmac.new(token, f"{nonce}:{node}".encode(), hashlib.sha256).hexdigest()


def proof_ok(token: bytes, nonce: str, node: int, answer: object) -> bool:
    return _same(proof(token, nonce, node), answer)


def welcome_proof(token: bytes, nonce: str) -> str:
    """What node 0 answers to a node's ``nonce``. The message ends in ``welcome``, which no
    node's answer (ending in its index) can: a program posing as node 0 cannot get a node to
    compute it by sending that node's nonce back as a challenge."""
    return hmac.new(token, f"{nonce}:welcome".encode(), hashlib.sha256).hexdigest()


def welcome_proof_ok(token: bytes, nonce: str, answer: object) -> bool:
    return _same(welcome_proof(token, nonce), answer)


def _same(expected: str, answer: object) -> bool:
    # compare_digest refuses non-ASCII str: a stranger's answer must not raise.
    if not isinstance(answer, str) or not answer.isascii():
        return False
    return hmac.compare_digest(expected, answer)


def encode(message: Message) -> bytes:
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
    if len(data) > MAX_MESSAGE:
        msg = f"job channel message {message.get('t')!r} is {len(data)} bytes (max {MAX_MESSAGE})"
        raise ValueError(msg)
    return data


PING = encode({"t": "ping"})  # the heartbeat, both ways: the one message sent by the thousand


def send(sock: socket.socket, message: Message) -> None:
    """Send one message; OSError (timeout included) means the peer is gone."""
    sock.sendall(encode(message))


class LineReader:
    """Cuts a byte stream into bounded lines and parses each as a message."""

    def __init__(self) -> None:
        self.buffer = b""
        self.dropped: List[str] = []  # why each malformed line was dropped, for warnings

    def feed(self, data: bytes, stop_at_drop: bool = False) -> Iterator[Message]:
        """Messages complete in ``data`` (plus what was buffered); malformed lines are dropped.

        ``stop_at_drop``: end at the first malformed line, the rest left unread (a stranger's
        first malformed line closes its connection anyway: a flood of 20,000 short lines a
        packet must not cost node 0 a JSON parse each).

        :raises ProtocolError: a line grew past :data:`MAX_MESSAGE`.
        """
        self.buffer += data
        while True:
            end = self.buffer.find(b"\n")
            if end < 0:
                if len(self.buffer) > MAX_MESSAGE:
                    msg = f"a line longer than {MAX_MESSAGE} bytes"
                    raise ProtocolError(msg)
                return
            line, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
            if len(line) > MAX_MESSAGE:
                msg = f"a line longer than {MAX_MESSAGE} bytes"
                raise ProtocolError(msg)
            message = parse(line)
            if message is None:
                self.dropped.append(f"not a JSON object with a type: {line[:60]!r}")
                if stop_at_drop:
                    return
                continue
            yield message


def parse(line: bytes) -> Optional[Message]:
    """A message, or None for anything that is not a JSON object with a string ``"t"``."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: deeply nested garbage
        return None
    if not isinstance(value, dict) or not isinstance(value.get("t"), str):
        return None
    return value
