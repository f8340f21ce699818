"""A stranger that floods a job port with idle connections and refills each one node 0 closes.

    flood_job_port.py HOST PORT COUNT STATUS_FILE [--seconds S]

Holds COUNT connections to HOST:PORT that never answer the challenge; whenever node 0 closes
one (eviction, handshake timeout), it opens another at once. STATUS_FILE gets ``ready`` once
COUNT connections are open, and at the end (SIGTERM, or after S seconds, 120 by default)
``opened N`` with the number of connections opened in all. Raises its own RLIMIT_NOFILE soft
limit to the hard one first, as a flood of 1,024 sockets needs.
"""

from __future__ import annotations

import argparse
import resource
import selectors
import signal
import socket
import time
from typing import List


def raise_file_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft < needed:
        raise SystemExit(f"flood_job_port: RLIMIT_NOFILE {soft} < {needed}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("count", type=int)
    parser.add_argument("status")
    parser.add_argument("--seconds", type=float, default=120.0)
    args = parser.parse_args()
    raise_file_limit(args.count + 64)
    stopping: List[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    selector = selectors.DefaultSelector()
    opened = 0
    held = 0

    def open_one() -> bool:
        nonlocal opened, held
        try:
            sock = socket.create_connection((args.host, args.port), timeout=1.0)
        except OSError:
            return False
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        opened += 1
        held += 1
        return True

    deadline = time.monotonic() + args.seconds
    ready = False
    while not stopping and time.monotonic() < deadline:
        while held < args.count and not stopping and open_one():
            pass
        if not ready and held >= args.count:
            with open(args.status, "w") as handle:
                handle.write("ready")
            ready = True
        for key, _ in selector.select(timeout=0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(4096)  # the challenge: read, never answered
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                selector.unregister(sock)
                sock.close()
                held -= 1
    with open(args.status, "w") as handle:
        handle.write(f"opened {opened}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
