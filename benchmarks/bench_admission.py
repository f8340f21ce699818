"""A node with the token gets in behind a flood: how long node 1 takes to join node 0's job
channel while a stranger holds N idle connections to the job port and reopens each one node 0
closes.

    .venv/bin/python benchmarks/bench_admission.py [--reps N] [--floods 0,64,256,1024]

Node 0's launcher (``--topology volcano``, two ranks) starts first; the flooder
(``tests/workers/flood_job_port.py``) then opens its N connections; node 1's launcher starts
once they are all open. Measured: node 1's start to its ranks running (every rank of the job
starts only once every node has joined), beside the same without a flood. Nothing here asserts
a time: the behaviour is tested in tests/e2e/test_job_admission.py.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_job import Job, malaunch_job

FLOODER = Path(__file__).resolve().parents[1] / "tests" / "workers" / "flood_job_port.py"


class Staged(Job):
    """Starts node 0 now and node 1 when asked."""

    def start(self, argvs: List[List[str]], envs: List[Dict[str, str]]) -> None:
        self.later = (argvs[1:], envs[1:])
        super().start(argvs[:1], envs[:1])

    def start_node_1(self) -> None:
        super().start(*self.later)


def job_port(job: Job) -> int:
    argv = [str(a) for a in job.procs[0].args]  # type: ignore[union-attr]
    return int(argv[argv.index("--master-port") + 1]) + 1


def listening(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("node 0 never listened")


def join_time(flood: int) -> str:
    with tempfile.TemporaryDirectory() as folder:
        job = Staged(Path(folder), "idle")
        flooder = None
        try:
            malaunch_job(job, ["--wait-timeout", "60"])
            port = job_port(job)
            listening(port)
            if flood:
                status = job.root / "flood.status"
                argv = [sys.executable, str(FLOODER), "127.0.0.1", str(port), str(flood)]
                flooder = subprocess.Popen([*argv, str(status)])
                deadline = time.monotonic() + 60
                while not (status.exists() and status.read_text() == "ready"):
                    if time.monotonic() > deadline or flooder.poll() is not None:
                        raise RuntimeError("the flood never reached its size")
                    time.sleep(0.01)
            moment = time.time()
            job.start_node_1()
            running = max(job.stamp(f"started-{rank}", timeout=60) for rank in (2, 3))
        except RuntimeError as exc:
            return f"not joined ({exc})"
        finally:
            if flooder is not None:
                flooder.terminate()
                flooder.wait()
            job.cleanup()
    return f"{running - moment:.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--floods", default="0,64,256,1024")
    args = parser.parse_args()
    print("| idle connections held (refilled) | node 1's start -> its ranks running, median |")
    print("|---|---|")
    for flood in (int(n) for n in args.floods.split(",")):
        results = [join_time(flood) for _ in range(args.reps)]
        numbers = [float(r.split()[0]) for r in results if r[0].isdigit()]
        if len(numbers) < len(results):
            cell = "; ".join(sorted(set(results)))
        else:
            each = ", ".join(r.split()[0] for r in results)
            cell = f"{statistics.median(numbers):.3f} s (of {each})"
        print(f"| {flood} | {cell} |")


if __name__ == "__main__":
    main()
