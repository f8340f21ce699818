"""One real node-0 launcher and a swarm of node clients (``tests/workers/node_swarm.py``):
a job of thousands of nodes on one machine, for tests/e2e/test_job_scale.py and
benchmarks/bench_channel.py.

Node 0 is the installed ``malaunch`` with ``--topology volcano``: its host file (the svc
plugin's ``worker.host``, under ``MALAUNCH_VOLCANO_DIR``) lists one loopback address per node
(127.0.0.1 for node 0, 127.1.x.y for the others, so that each node dials from an address of
its own, as on a cluster). The token, the job port and the heartbeat interval are derived
here as every node launcher derives them (:func:`malaunch.job.settings.job_settings` on the
Volcano topology of node 1), and handed to the swarm processes, each of which plays a share of
nodes 1..N-1.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from malaunch.job.settings import DEFAULT_HEARTBEAT_TIMEOUT, JobSettings, job_settings
from malaunch.models import ResolveOptions
from malaunch.testing import clean_env, malaunch_executable
from malaunch.topology import volcano

SWARM = Path(__file__).resolve().parents[1] / "workers" / "node_swarm.py"
Event = Dict[str, Any]


def node_address(index: int) -> str:
    """Node ``index``'s loopback address: its own, so admission sees one host per node."""
    if index == 0:
        return "127.0.0.1"
    return f"127.1.{index // 250}.{index % 250 + 1}"


def free_port_pair() -> int:
    """A port P with P+1 free too (the master port and the job port after it)."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port < 65535:
            with contextlib.suppress(OSError), socket.socket() as other:
                other.bind(("", port + 1))
                return port
    raise RuntimeError("no two free ports in a row")


class SwarmJob:
    """Node 0's launcher and the swarm processes; a context manager that leaves nothing."""

    def __init__(self, root: Path, nodes: int, swarms: int = 1) -> None:
        self.root = root
        self.nodes = nodes
        self.swarms = swarms
        self.platform = root / "platform"
        self.platform.mkdir(parents=True, exist_ok=True)
        self.hosts = self.platform / "worker.host"
        self.hosts.write_text("\n".join(node_address(i) for i in range(nodes)))
        self.env = {
            "MALAUNCH_VOLCANO_DIR": str(self.platform),
            "VC_WORKER_PORT": str(free_port_pair()),
            "VC_TASK_INDEX": "0",
        }
        self.log_dir = root / "logs"
        self.node0: Optional[subprocess.Popen[bytes]] = None
        self.procs: List[subprocess.Popen[str]] = []
        self.readers: List[threading.Thread] = []
        self.events: queue.Queue[Event] = queue.Queue()
        self.backlog: List[Event] = []
        self.settings = self.derive()

    def derive(self, heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT) -> JobSettings:
        """What node 1's launcher derives: the token, the port, the heartbeat interval."""
        topology = volcano.resolve({**self.env, "VC_TASK_INDEX": "1"}, ResolveOptions())
        settings = job_settings(
            topology,
            requested_port=None,
            secret="",
            heartbeat_timeout=heartbeat_timeout,
            wait_timeout=600.0,
        )
        assert settings is not None
        return settings

    def start_node_0(self, options: Sequence[str], rank: Sequence[str]) -> None:
        argv = [
            malaunch_executable(), "--framework", "torch_ddp", "--topology", "volcano",
            "--nproc-per-node", "1", "--log-dir", str(self.log_dir), "--console-ranks", "none",
            *options, "--", *rank,
        ]  # fmt: skip
        with open(self.root / "node0.out", "wb") as out:
            self.node0 = subprocess.Popen(
                argv,
                env=clean_env(self.env),
                cwd=self.root,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_listening(self, timeout: float = 120.0) -> None:
        """Until node 0 listens on the job port (read from /proc: a probe would be a stranger)."""
        port = f"{self.settings.port:04X}"
        deadline = time.monotonic() + timeout
        while not any(_listens(table, port) for table in ("tcp", "tcp6")):
            assert self.node0 is not None and self.node0.poll() is None, self.output()
            assert time.monotonic() < deadline, f"node 0 never listened: {self.output()}"
            time.sleep(0.02)

    def start_swarms(self, answer_after: float = 0.0) -> None:
        """Nodes 1..N-1 in ``swarms`` processes; returns once each says it is ready. With
        ``answer_after``, each node answers node 0's challenge that many seconds late."""
        share = -(-(self.nodes - 1) // self.swarms)
        for first in range(1, self.nodes, share):
            argv = [
                sys.executable, str(SWARM), "--port", str(self.settings.port),
                "--token", self.settings.token.hex(), "--hosts", str(self.hosts),
                "--first", str(first), "--count", str(min(share, self.nodes - first)),
                "--interval", str(self.settings.heartbeat_interval),
                "--timeout", str(self.settings.silence_timeout),
                "--answer-after", str(answer_after),
            ]  # fmt: skip
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
            )
            self.procs.append(proc)
            reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
            reader.start()
            self.readers.append(reader)
        self.wait("ready", timeout=60)

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.events.put(json.loads(line))

    def tell(self, line: str) -> None:
        """A command to every swarm process (each acts on the nodes it plays)."""
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(line + "\n")
            proc.stdin.flush()

    def wait(
        self, kind: str, timeout: float, count: Optional[int] = None, **match: Any
    ) -> List[Event]:
        """``count`` events of ``kind`` (default: one from each swarm process) whose fields
        match ``match``; events that do not match are kept for a later wait."""
        wanted = len(self.procs) if count is None else count
        found: List[Event] = []
        deadline = time.monotonic() + timeout

        def fits(event: Event) -> bool:
            return event["event"] == kind and all(event.get(k) == v for k, v in match.items())

        for event in [e for e in self.backlog if fits(e)][:wanted]:
            self.backlog.remove(event)
            found.append(event)
        while len(found) < wanted:
            left = deadline - time.monotonic()
            assert left > 0, f"{len(found)} of {wanted} {kind} {match} events: {self.backlog}"
            try:
                event = self.events.get(timeout=left)
            except queue.Empty:
                continue
            (found if fits(event) else self.backlog).append(event)
        return found

    def status(self) -> Dict[str, Dict[str, int]]:
        """Every swarm's nodes by state (``states``: joined, gone, ...) and what its nodes ran
        into (``counts``: tries closed early, ``busy``, timed out, ...), added up."""
        self.tell("status")
        total: Dict[str, Dict[str, int]] = {"states": {}, "counts": {}}
        for event in self.wait("status", timeout=60):
            for part, added in total.items():
                for key, count in event[part].items():
                    added[key] = added.get(key, 0) + count
        return total

    def output(self) -> str:
        path = self.root / "node0.out"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def close(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.write("quit\n")
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader, proc in zip(self.readers, self.procs):
            reader.join(timeout=10)  # it ends at the swarm's end of output
            assert proc.stdout is not None
            proc.stdout.close()
        if self.node0 is not None and self.node0.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(self.node0.pid, signal.SIGKILL)
            self.node0.wait(timeout=30)

    def __enter__(self) -> SwarmJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _listens(table: str, port: str) -> bool:
    try:
        lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
    except OSError:
        return False
    return any(line.split()[1].endswith(f":{port}") and line.split()[3] == "0A" for line in lines)
