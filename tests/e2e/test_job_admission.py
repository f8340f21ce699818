"""A node with the token always gets in (SPEC §9), whatever strangers do to the job port.

Node 0's launcher is started first; a flooder process (``tests/workers/flood_job_port.py``)
then holds 64, 256 or 1,024 idle connections to the job port and opens a new one each time
node 0 closes one; only then is node 1 started, with ``--wait-timeout 10``. Fair admission
must let it join before that timeout, and the job must succeed. Launchers are started from
``simulate --print-env``'s commands, over real sockets on loopback.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator, List

import pytest
from launchers import Launchers, NodeCommand, option, printed_nodes, recorded_pids

from malaunch.testing import wait_gone

WORKERS = Path(__file__).parents[1] / "workers"


def nodes_of(tmp_path: Path, launcher: List[str], steps: int = 3) -> List[NodeCommand]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    args = [
        "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano",
        "--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs"),
        "--platform-dir", str(tmp_path / "platform"), "--console-ranks", "none", *launcher,
        "--", sys.executable, str(WORKERS / "job_worker.py"), str(out), "--steps", str(steps),
    ]  # fmt: skip
    return printed_nodes(args, cwd=tmp_path)


def wait_listening(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        assert time.monotonic() < deadline, f"nothing listens on {port}"
        time.sleep(0.05)


@contextlib.contextmanager
def flood(port: int, count: int, folder: Path) -> Iterator[Path]:
    """The flooder, running until the block ends; yields its status file."""
    status = folder / f"flood-{count}.status"
    proc = subprocess.Popen(
        [sys.executable, str(WORKERS / "flood_job_port.py"), "127.0.0.1", str(port), str(count),
         str(status)],
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (status.exists() and status.read_text() == "ready"):
            assert proc.poll() is None, "the flooder ended early"
            assert time.monotonic() < deadline, "the flood never reached its size"
            time.sleep(0.02)
        yield status
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.parametrize("count", [64, 256, 1024])
def test_node_1_joins_behind_a_refilled_flood_of_idle_connections(
    tmp_path: Path, count: int
) -> None:
    nodes = nodes_of(tmp_path, launcher=[])
    port = int(option(nodes[0].argv, "--job-port"))
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(0, {"MALAUNCH_WAIT_TIMEOUT": "120"})
        wait_listening(port)
        with flood(port, count, tmp_path) as status:
            launchers.start(1, {"MALAUNCH_WAIT_TIMEOUT": "10"})
            codes = launchers.wait(timeout=90)
            output = launchers.output()
        opened = int(status.read_text().split()[1])
    # Joined before its --wait-timeout of 10 s (else it exits 69), and the job ran to the end.
    assert codes == {0: 0, 1: 0}, output
    assert sorted(p.name for p in (tmp_path / "out").glob("ok-*")) == [
        f"ok-{rank}-0" for rank in range(4)
    ]
    assert opened >= count
    if count > 256:  # more than the waiting room holds: node 0 closed the oldest
        assert opened > count
        # 256 strangers, plus one place per node still to join when the line was written
        assert re.search(r"too many unauthenticated connections \(25[67] waiting\): closed", output)
    assert "lost node" not in output
    assert wait_gone(recorded_pids(tmp_path / "out")) == []


class ClosingServer:
    """Takes the job port and closes every connection at once, before any handshake: what a
    node sees when node 0 is too busy to let it in."""

    def __init__(self, port: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.2)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.is_set():
            with contextlib.suppress(socket.timeout):
                conn, _ = self.listener.accept()
                conn.close()

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)
        self.listener.close()


def test_a_node_kept_out_names_what_it_saw(tmp_path: Path) -> None:
    """Not only the last socket error: how many tries node 0 closed before the handshake."""
    nodes = nodes_of(tmp_path, launcher=["--wait-timeout", "3"])
    port = int(option(nodes[1].argv, "--job-port"))
    server = ClosingServer(port)
    try:
        with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
            launchers.start(1)
            codes = launchers.wait(timeout=30)
    finally:
        server.close()
    last = launchers.output(1).splitlines()[-1]
    assert codes == {1: 69}, launchers.output(1)
    pattern = (
        rf"malaunch: error: node 0's launcher at 127\.0\.0\.1:{port} \(job channel, --job-port\) "
        r"did not let node 1 in within 3s; of (\d+) tries: node 0 closed (\d+) connection "
        r"attempts before the handshake \(another program floods the job port, or node 0 was "
        r"going away\); last error: node 0 closed the connection before the handshake"
    )
    match = re.fullmatch(pattern, last)
    assert match is not None, last
    assert int(match.group(1)) == int(match.group(2)) >= 3


@contextlib.contextmanager
def line_flood(port: int, connections: int) -> Iterator[None]:
    """Strangers that each send packets of 20,000 short lines that are JSON but no message
    (``{}``), reconnecting as soon as node 0 closes them."""
    packet = b"{}\n" * 20000
    stop = threading.Event()

    def one() -> None:
        while not stop.is_set():
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), 2) as s,
            ):
                s.settimeout(2)
                while not stop.is_set():
                    s.sendall(packet)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)


def test_node_1_joins_behind_strangers_sending_floods_of_short_lines(tmp_path: Path) -> None:
    # Node 0 parsed every line a stranger sent before closing it for the first malformed one:
    # 40 such strangers kept node 1 out for 15 s and more. A stranger is read no further.
    nodes = nodes_of(tmp_path, launcher=[])
    port = int(option(nodes[0].argv, "--job-port"))
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(0, {"MALAUNCH_WAIT_TIMEOUT": "120"})
        wait_listening(port)
        with line_flood(port, 40):
            time.sleep(1)
            launchers.start(1, {"MALAUNCH_WAIT_TIMEOUT": "5"})
            codes = launchers.wait(timeout=90)
            output = launchers.output()
    assert codes == {0: 0, 1: 0}, output
    assert wait_gone(recorded_pids(tmp_path / "out")) == []
