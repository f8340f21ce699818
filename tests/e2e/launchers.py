"""Node launchers started one by one, as on a cluster: no ``simulate`` parent.

``malaunch simulate --print-env`` prints, for each node, the environment its platform would
inject and its complete launcher command. :func:`printed_nodes` parses that, and
:class:`Launchers` starts each command in a session of its own with that environment (plus a
clean copy of ours), records when each one exits, and kills anything left by pid.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from malaunch.testing import clean_env, pid_alive, run_cli, run_dir


@dataclasses.dataclass
class NodeCommand:
    index: int
    env: Dict[str, str]
    argv: List[str]


def printed_nodes(
    args: Sequence[str], cwd: Path, env: Optional[Dict[str, str]] = None
) -> List[NodeCommand]:
    """The nodes ``malaunch simulate --print-env ARGS`` describes (run in ``env``, default
    :func:`clean_env`: a plugin's framework needs its ``PYTHONPATH``)."""
    result = run_cli(["simulate", "--print-env", *args], env=env, cwd=cwd)
    assert result.code == 0, result.stderr
    nodes: List[NodeCommand] = []
    for line in result.stdout.splitlines():
        if line.startswith("# node "):
            nodes.append(NodeCommand(int(line.split()[2].rstrip(":")), {}, []))
        elif line.startswith("# launcher: "):
            nodes[-1].argv = shlex.split(line[len("# launcher: ") :])
        elif line and not line.startswith("#") and nodes:
            key, _, value = shlex.split(line)[0].partition("=")  # quoted for a shell
            nodes[-1].env[key] = value
    assert nodes and all(node.argv for node in nodes), result.stdout
    return nodes


def node_dir(log_dir: Path, node: int) -> Path:
    """The folder node ``node``'s launcher wrote its run in: the latest run in ``node-<k>/``
    for a launcher started from ``--print-env``'s command (it keeps run folders of its own
    there), else ``node-<k>/`` of the latest simulation run in ``log_dir``."""
    by_hand = log_dir / f"node-{node}"
    return run_dir(by_hand) if by_hand.is_dir() else run_dir(log_dir) / f"node-{node}"


def option(argv: Sequence[str], name: str) -> str:
    """The value of ``name`` in a launcher command."""
    return argv[list(argv).index(name) + 1]


class Launchers:
    """The started node launchers; use as a context manager so nothing outlives a test."""

    def __init__(self, nodes: Sequence[NodeCommand], cwd: Path, logs: Path) -> None:
        self.nodes = list(nodes)
        self.cwd = cwd
        self.logs = logs
        self.procs: Dict[int, subprocess.Popen[bytes]] = {}
        self.ended: Dict[int, float] = {}

    def start(self, index: int, extra_env: Optional[Dict[str, str]] = None) -> None:
        node = self.nodes[index]
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"launcher-{index}.out", "ab") as out:  # a restart appends
            self.procs[index] = subprocess.Popen(
                node.argv,
                env=clean_env({**node.env, **(extra_env or {})}),
                cwd=self.cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start_all(self) -> None:
        for index in range(len(self.nodes)):
            self.start(index)

    def wait(self, timeout: float, only: Optional[Sequence[int]] = None) -> Dict[int, int]:
        """Wait for the launchers (``only`` these); record when each exited (time.time);
        return their exit codes."""
        chosen = sorted(self.procs if only is None else only)
        deadline = time.monotonic() + timeout
        while any(i not in self.ended for i in chosen) and time.monotonic() < deadline:
            for index in chosen:
                if index not in self.ended and self.procs[index].poll() is not None:
                    self.ended[index] = time.time()
            time.sleep(0.01)
        missing = [i for i in chosen if i not in self.ended]
        assert not missing, f"launchers {missing} still running after {timeout}s: {self.output()}"
        return {index: self.procs[index].returncode for index in chosen}

    def output(self, index: Optional[int] = None) -> str:
        indices = [index] if index is not None else sorted(self.procs)
        return "\n".join(
            f"--- node {i} ---\n" + (self.logs / f"launcher-{i}.out").read_text(errors="replace")
            for i in indices
        )

    def __enter__(self) -> Launchers:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def recorded_pids(folder: Path) -> List[int]:
    """Every pid written to ``folder/*.pid`` by the test workers."""
    return [int(p.read_text()) for p in folder.glob("*.pid") if p.read_text().strip()]


def alive(pids: Sequence[int]) -> List[int]:
    return [pid for pid in pids if pid_alive(pid)]
