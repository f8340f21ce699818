"""The socket that ``malaunch.context.heartbeat()`` writes to.

A rank that is healthy but silent for long (a long evaluation, a checkpoint upload) calls
``heartbeat()`` so that ``--hang-timeout`` does not take it for hung. Each call that is due
(at most one per ``MALAUNCH_HEARTBEAT_INTERVAL``) sends one datagram holding the rank's number
to this launcher's Unix socket in the abstract namespace (Linux; no file to create or clean
up). A datagram socket needs no connection and no inherited file descriptor, so grandchildren
(torchrun's workers, data loader processes) can beat too, and a launcher that is gone costs
the rank one failed ``sendto``.
"""

from __future__ import annotations

import os
import secrets
import socket
from typing import Callable, Dict

from malaunch.events import EventLoop

ADDRESS_VAR = "MALAUNCH_HEARTBEAT"
INTERVAL_VAR = "MALAUNCH_HEARTBEAT_INTERVAL"
MAX_DATAGRAMS_PER_EVENT = 256


class HeartbeatSocket:
    """Receives heartbeats; ``on_beat(rank_text)`` for each one."""

    def __init__(self, loop: EventLoop, on_beat: Callable[[str], None]) -> None:
        self.loop = loop
        self.on_beat = on_beat
        name = f"malaunch-heartbeat-{os.getpid()}-{secrets.token_hex(6)}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + name)
        self.sock.setblocking(False)
        self.address = "@" + name  # "@" stands for the abstract namespace's leading NUL
        loop.add_reader(self.sock.fileno(), self._readable)

    def env(self, interval: float) -> Dict[str, str]:
        """What each process needs to beat: the address and how often to bother."""
        return {ADDRESS_VAR: self.address, INTERVAL_VAR: f"{interval:g}"}

    def _readable(self) -> None:
        for _ in range(MAX_DATAGRAMS_PER_EVENT):
            try:
                data = self.sock.recv(64)
            except (BlockingIOError, InterruptedError):
                return
            self.on_beat(data.decode("ascii", "replace").strip())

    def close(self) -> None:
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
