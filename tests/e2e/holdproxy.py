"""A TCP relay on loopback in front of a real server, for the staging tests: :meth:`hold`
stops it passing bytes, so that every request under way, or to come, waits for an answer that
never comes, as on a connection that died without a word. Never a mocked client: the launcher
talks to moto through it."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import List, Optional


class HoldingProxy:
    """Relays ``127.0.0.1:<port>`` to ``127.0.0.1:<upstream>`` until :meth:`hold`."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.holding = threading.Event()
        # Set once bytes arrived while holding: a request (or its answer) is stuck now.
        self.stuck = threading.Event()
        self.closed = threading.Event()
        self.sockets: List[socket.socket] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def __enter__(self) -> HoldingProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def hold(self) -> None:
        """From now on, keep what either side sends."""
        self.holding.set()

    def close(self) -> None:
        self.closed.set()
        self.listener.close()
        with self.lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.close()
        self.thread.join(5)

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            server: Optional[socket.socket] = None
            with contextlib.suppress(OSError):
                server = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
                server.settimeout(None)
            if server is None:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if self.holding.is_set():
                    self.stuck.set()
                while self.holding.is_set():
                    if self.closed.wait(0.05):
                        return
                target.sendall(data)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)
