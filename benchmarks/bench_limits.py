"""Limits benchmark: how precisely ``--wait-timeout`` ends, and 1,000 ranks under 1,024 files.

    .venv/bin/python benchmarks/bench_limits.py [--reps 3] [--waits 1,5]

Prints a markdown table (median and worst of ``--reps`` runs per row):

- node 0 alone: a two-node Volcano job whose node 1 never starts; node 0 waits for it to join;
- node 1 alone: the same job's node 1, whose node 0 never starts (connection refused);
- silent node 0: node 1 against a port that accepts connections and never answers;
- 1,000 ranks: ``--nproc-per-node 1000 -- true`` under a soft limit of 1,024 open files (hard
  4,096), from the command's start to its exit.

Each wait row shows how long past ``--wait-timeout`` the launcher exited, start-up included;
the first row, a dry run, is that start-up and exit alone (the interpreter, click, the
plugins). Nothing here asserts a time: this is a measurement, the tests are in
tests/e2e/test_limits.py.
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

MALAUNCH = str(Path(sys.executable).with_name("malaunch"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def timed(
    args: List[str], env: Dict[str, str], preexec: Optional[Callable[[], None]] = None
) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        subprocess.run(
            [MALAUNCH, *args, "--log-dir", f"{tmp}/logs", "--", "true"],
            env={"PATH": "/usr/bin:/bin", **env},
            cwd=tmp,
            capture_output=True,
            check=False,
            preexec_fn=preexec,
        )
        return time.monotonic() - started


def lone_node(node: int, wait: float, port: int) -> float:
    env = {
        "VC_WORKER_HOSTS": "127.0.0.1,127.0.0.2",
        "VC_TASK_INDEX": str(node),
        "MALAUNCH_JOB_PORT": str(port),
    }
    return timed(["--framework", "torch_ddp", "--wait-timeout", str(wait)], env) - wait


def silent_node_0(wait: float) -> float:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        return lone_node(1, wait, int(server.getsockname()[1]))


def thousand_ranks() -> float:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 4096))

    args = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "1000",
            "--console-ranks", "none"]  # fmt: skip
    return timed(args, {}, lower)


def row(name: str, samples: List[float]) -> str:
    return f"| {name} | {statistics.median(samples):.3f} | {max(samples):.3f} |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--waits", default="1,5")
    options = parser.parse_args()
    print("| case | median s | worst s |")
    print("|---|---|---|")
    floor = [timed(["--framework", "torch_ddp", "--topology", "local", "--dry-run"], {})
             for _ in range(options.reps)]  # fmt: skip
    print(row("start-up floor: a dry run, start to exit", floor), flush=True)
    for wait in (float(text) for text in options.waits.split(",")):
        cases: Dict[str, Callable[[float], float]] = {
            "node 0 alone": lambda w: lone_node(0, w, free_port()),
            "node 1 alone": lambda w: lone_node(1, w, free_port()),
            "silent node 0": silent_node_0,
        }
        for name, case in cases.items():
            label = f"{name}, --wait-timeout {wait:g}: past it"
            print(row(label, [case(wait) for _ in range(options.reps)]), flush=True)
    print(
        row(
            "1,000 ranks under soft 1,024: start to exit",
            [thousand_ranks() for _ in range(options.reps)],
        )
    )


if __name__ == "__main__":
    main()
