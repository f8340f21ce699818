"""Lose a node, keep the job: the time to recover from a lost node, malaunch against torchrun.

    .venv/bin/python benchmarks/bench_replace.py [--reps N] [--torchrun PATH] [--cap S]

Two nodes of two ranks each on loopback, every launcher its own process, as on a cluster. Once
all four ranks run, one node's launcher (agent) is SIGKILLed and started again at once with the
same command, as a kubelet or an operator recreates a pod. **Time to recover** = from that
restart to all four ranks running again (each rank stamps its start). Rows:

- **malaunch, node 1 replaced**: ``--max-restarts 1``; node 0 waits for node 1's replacement,
  which rejoins; the next attempt starts on both nodes.
- **malaunch, node 0 replaced**: node 1 redials node 0's address; the new node 0 adopts the job.
- **malaunch, whole-job restart**: what replacement saves, as after Volcano's ``RestartJob``:
  both launchers started again from nothing (the platform's own cost of recreating every pod,
  minutes on a cluster, is not counted).
- **torchrun, non-store agent replaced**: two agents with a c10d rendezvous (``--max-restarts
  1``), node 0's started first so that it hosts the rendezvous store; the agent of node 1 is
  killed and restarted.
- **torchrun, store agent replaced**: the same with node 0's agent, which hosts the store.

A row that does not recover within ``--cap`` seconds says what happened instead. Nothing here
asserts a time: the behaviour is tested in tests/e2e/test_job_replacement.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_job import Job, malaunch_job, torchrun_job

RANKS = 4


class RecordingJob(Job):
    """A :class:`bench_job.Job` that keeps each launcher's environment, to start it again, and
    starts node 0 first: with torchrun, the agent that binds the c10d endpoint first hosts the
    store, and on one machine either could (both see the endpoint's address as their own)."""

    envs: List[Dict[str, str]]

    def start(self, argvs: List[List[str]], envs: List[Dict[str, str]]) -> None:
        self.envs = list(envs)
        super().start(argvs[:1], envs[:1])
        endpoint = [a for a in argvs[0] if a.startswith("127.0.0.1:")]
        if endpoint:
            listening(int(endpoint[0].split(":")[1]))
        super().start(argvs[1:], envs[1:])


def listening(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.01)


def all_running_since(job: Job, since: float, cap: float) -> Optional[float]:
    """time.time() when every rank had stamped a start after ``since`` (None: not in cap)."""
    deadline = time.monotonic() + cap
    while time.monotonic() < deadline:
        stamps = []
        for rank in range(RANKS):
            path = job.stamps / f"started-{rank}"
            try:
                stamps.append(float(path.read_text()))
            except (OSError, ValueError):
                break
        if len(stamps) == RANKS and min(stamps) > since:
            return max(stamps)
        time.sleep(0.005)
    return None


def restart(job: RecordingJob, node: int) -> float:
    """SIGKILL launcher ``node`` and start its command again; the moment it was started."""
    proc = job.procs[node]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    argv = [str(arg) for arg in proc.args]  # type: ignore[union-attr]
    env = job.envs[node]
    moment = time.time()
    job.procs[node] = subprocess.Popen(
        argv,
        env=env,
        cwd=job.root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return moment


def recovery(launch: Callable[[Job], None], node: int, cap: float) -> str:
    with tempfile.TemporaryDirectory() as folder:
        job = RecordingJob(Path(folder), "idle")
        try:
            launch(job)
            if all_running_since(job, 0.0, 120) is None:
                return "did not start"
            moment = restart(job, node)
            running = all_running_since(job, moment, cap)
            codes = [p.poll() for p in job.procs]
        finally:
            job.cleanup()
    if running is None:
        exited = [f"node {i} exited {c}" for i, c in enumerate(codes) if c is not None]
        return f"not recovered in {cap:g} s ({', '.join(exited) or 'all still running'})"
    return f"{running - moment:.3f} s"


def whole_job(launch: Callable[[Job], None]) -> str:
    with tempfile.TemporaryDirectory() as folder:
        job = RecordingJob(Path(folder), "idle")
        try:
            moment = time.time()
            launch(job)
            running = all_running_since(job, moment, 120)
        finally:
            job.cleanup()
    return "did not start" if running is None else f"{running - moment:.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--cap", type=float, default=60.0)
    default_torchrun = str(Path(sys.executable).with_name("torchrun"))
    parser.add_argument("--torchrun", default=os.environ.get("BENCH_TORCHRUN", default_torchrun))
    args = parser.parse_args()
    torchrun = shutil.which(args.torchrun)

    def median_of(measure: Callable[[], str]) -> str:
        results = [measure() for _ in range(args.reps)]
        numbers = [float(r.split()[0]) for r in results if r[0].isdigit()]
        if len(numbers) < len(results):
            return "; ".join(sorted(set(results)))
        return f"{statistics.median(numbers):.3f} s (of {', '.join(r.split()[0] for r in results)})"

    def ours(job: Job) -> None:
        malaunch_job(job, ["--max-restarts", "1"])

    def theirs(job: Job) -> None:
        torchrun_job(job, str(torchrun), ["--max-restarts", "1"])

    rows = [
        ("malaunch, node 1 replaced", median_of(lambda: recovery(ours, 1, args.cap))),
        ("malaunch, node 0 replaced", median_of(lambda: recovery(ours, 0, args.cap))),
        ("malaunch, whole-job restart (every launcher anew)", median_of(lambda: whole_job(ours))),
    ]
    if torchrun:
        rows += [
            (
                "torchrun, non-store agent replaced",
                median_of(lambda: recovery(theirs, 1, args.cap)),
            ),
            ("torchrun, store agent replaced", median_of(lambda: recovery(theirs, 0, args.cap))),
        ]
    else:
        print(f"note: torchrun not found at {args.torchrun}; its rows are left out")
    print("| time to recover (replacement's start -> all ranks running) | median |")
    print("|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
