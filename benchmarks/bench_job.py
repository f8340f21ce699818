"""The job across nodes: malaunch's node launchers against two torchrun agents, in one run.

    .venv/bin/python benchmarks/bench_job.py [--reps N] [--torchrun PATH] [--idle S]

Two nodes of two ranks each on loopback, every launcher started as its own process, as on a
cluster. Prints a markdown table (median of ``--reps`` runs):

- **cross-node stop**: rank 3 (node 1) exits 3 once all four ranks run; the time from its
  exit to the exit of the *last* launcher. malaunch: two ``malaunch --topology volcano``
  launchers joined by the job channel. torchrun: two agents with a c10d rendezvous
  (``--rdzv-backend c10d --nnodes 2``); an agent still running after ``--cap`` seconds is
  reported as such and killed.
- **hang detection**: rank 1 stops printing (a sleep loop) once started, with
  ``--hang-timeout 2``: the time from its last line to the moment node 0 detected it
  (``hang.detected_at`` in the summary), and to the exit of the last launcher (stacks captured
  by py-spy, the job stopped). torchrun has no hang detection.
- **idle CPU**: each launcher's CPU over ``--idle`` seconds while four ranks sleep, with the
  channel (and its heartbeats) open, from ``/proc/<pid>/task/*/schedstat``.

Nothing here asserts a time: the behaviour is tested in tests/e2e/test_job_channel.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_supervisor import alive, cpu_seconds, helpers_of, kill_all

MALAUNCH = str(Path(sys.executable).with_name("malaunch"))
HOSTS = ("127.0.0.1", "127.0.0.2")

WORKER = r"""
import os, sys, time
stamps, mode = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK"])
open(os.path.join(stamps, "pid-%d" % os.getpid()), "w").write(str(os.getpid()))
open(os.path.join(stamps, "started-%d" % rank), "w").write(repr(time.time()))
if mode == "fail" and rank == 3:
    while len([n for n in os.listdir(stamps) if n.startswith("started-")]) < 4:
        time.sleep(0.005)
    open(os.path.join(stamps, "failed-at"), "w").write(repr(time.time()))
    sys.exit(3)
if mode == "hang" and rank == 1:
    print("rank 1: last words", flush=True)
    open(os.path.join(stamps, "silent-from"), "w").write(repr(time.time()))
    while True:
        time.sleep(0.05)
while True:
    print("rank %d alive" % rank, flush=True)
    time.sleep(0.5 if mode == "hang" else 60)
"""


class Job:
    """Two launchers of one job, their stamps directory and their log dir."""

    def __init__(self, root: Path, mode: str) -> None:
        self.root = root
        self.mode = mode
        self.stamps = root / "stamps"
        self.stamps.mkdir(parents=True)
        self.script = root / "worker.py"
        self.script.write_text(WORKER)
        self.procs: List[subprocess.Popen[bytes]] = []

    def worker(self) -> List[str]:
        return [sys.executable, "-S", str(self.script), str(self.stamps), self.mode]

    def start(self, argvs: List[List[str]], envs: List[Dict[str, str]]) -> None:
        for argv, env in zip(argvs, envs):
            self.procs.append(
                subprocess.Popen(
                    argv,
                    env=env,
                    cwd=self.root,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )

    def stamp(self, name: str, timeout: float = 60.0) -> float:
        path = self.stamps / name
        deadline = time.monotonic() + timeout
        while not path.exists() or not path.read_text():
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {name} after {timeout}s")
            time.sleep(0.002)
        return float(path.read_text())

    def wait_all(self, cap: float) -> Optional[float]:
        """time.time() when the last launcher exited, or None if one was still running at cap."""
        deadline = time.monotonic() + cap
        while any(p.poll() is None for p in self.procs):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.002)
        return time.time()

    def cleanup(self) -> None:
        workers = [int(p.read_text()) for p in self.stamps.glob("pid-*")]
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        kill_all(workers)


def base_env() -> Dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    return {key: os.environ[key] for key in keep if key in os.environ}


def free_port() -> int:
    import socket  # noqa: PLC0415 (only here)

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def malaunch_job(job: Job, extra: List[str]) -> None:
    port = free_port()
    argvs, envs = [], []
    for node in range(2):
        env = base_env()
        env.update(VC_WORKER_HOSTS=",".join(HOSTS), VC_TASK_INDEX=str(node))
        argvs.append(
            [
                MALAUNCH,
                "--framework",
                "torch_ddp",
                "--topology",
                "volcano",
                "--nproc-per-node",
                "2",
                "--master-port",
                str(port),
                "--grace-period",
                "5",
                "--console-ranks",
                "none",
                "--log-dir",
                str(job.root / f"logs-{node}"),
                *extra,
                "--",
                *job.worker(),
            ]
        )
        envs.append(env)
    job.start(argvs, envs)


def torchrun_job(job: Job, torchrun: str, extra: Sequence[str] = ()) -> None:
    port = free_port()
    argvs = [
        [
            torchrun,
            "--nnodes",
            "2",
            "--node-rank",
            str(node),
            "--nproc-per-node",
            "2",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--rdzv-id",
            "bench",
            *extra,
            "--no-python",
            *job.worker(),
        ]
        for node in range(2)
    ]
    job.start(argvs, [base_env(), base_env()])


def cross_node_stop(launch: Callable[[Job], None], cap: float) -> str:
    with tempfile.TemporaryDirectory() as folder:
        job = Job(Path(folder), "fail")
        try:
            launch(job)
            failed = job.stamp("failed-at", timeout=120)
            ended = job.wait_all(cap)
            codes = [p.poll() for p in job.procs]
        finally:
            job.cleanup()
    if ended is None:
        return f"> {cap:g} s (still running; codes {codes})"
    return f"{ended - failed:.3f} s (codes {codes})"


def hang_detection(cap: float) -> str:
    with tempfile.TemporaryDirectory() as folder:
        job = Job(Path(folder), "hang")
        try:
            malaunch_job(job, ["--hang-timeout", "2", "--hang-startup-timeout", "60"])
            silent = job.stamp("silent-from", timeout=120)
            ended = job.wait_all(cap)
            summary = json.loads((job.root / "logs-0" / "malaunch-summary.json").read_text())
        finally:
            job.cleanup()
    hang = summary.get("hang") or {}
    detected = hang.get("detected_at")
    if detected is None or ended is None:
        return "not detected"
    stop = f"{ended - silent:.3f} s to stop"
    return f"{detected - silent:.3f} s to detect, {stop} (culprits {hang.get('culprits')})"


def idle_cpu(launch: Callable[[Job], None], idle: float) -> str:
    with tempfile.TemporaryDirectory() as folder:
        job = Job(Path(folder), "idle")
        try:
            launch(job)
            for rank in range(4):
                job.stamp(f"started-{rank}", timeout=120)
            time.sleep(1.0)  # let start-up settle
            pids = [p.pid for p in job.procs]
            pids += [h for pid in pids for h in helpers_of(pid, [])]
            before = {pid: cpu_seconds(pid) for pid in pids if alive(pid)}
            time.sleep(idle)
            used = [cpu_seconds(pid) - start for pid, start in before.items()]
        finally:
            job.cleanup()
    return f"{100 * sum(used) / idle / 2:.4f} % per launcher"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--cap", type=float, default=60.0)
    default_torchrun = str(Path(sys.executable).with_name("torchrun"))
    parser.add_argument("--torchrun", default=os.environ.get("BENCH_TORCHRUN", default_torchrun))
    args = parser.parse_args()
    torchrun = shutil.which(args.torchrun)
    if torchrun is None:
        print(f"note: torchrun not found at {args.torchrun}; its column is left out")

    def median_of(measure: Callable[[], str]) -> str:
        results = [measure() for _ in range(args.reps)]
        numbers = [float(r.split()[0]) for r in results if r[0].isdigit()]
        if len(numbers) < len(results):
            return results[0]
        return f"{statistics.median(numbers):.3f} s (of {', '.join(r.split()[0] for r in results)})"

    ours: Callable[[Job], None] = lambda job: malaunch_job(job, [])  # noqa: E731 (a table cell)
    theirs: Callable[[Job], None] = lambda job: torchrun_job(job, str(torchrun))  # noqa: E731 (same)
    stop_row = median_of(lambda: cross_node_stop(ours, args.cap))
    torch_stop = cross_node_stop(theirs, args.cap) if torchrun else "n/a"
    rows = [
        ("cross-node stop (failure -> last launcher exit)", stop_row, torch_stop, "median <= 1 s"),
        (
            "hang detection (--hang-timeout 2)",
            hang_detection(args.cap),
            "none",
            "<= timeout + 0.5 s",
        ),
        (
            "idle CPU, channel open",
            idle_cpu(ours, args.idle),
            idle_cpu(theirs, args.idle) if torchrun else "n/a",
            "~ 0",
        ),
    ]
    print("| scenario | malaunch | torchrun (c10d) | goal |")
    print("|---|---|---|---|")
    for name, mine, other, goal in rows:
        print(f"| {name} | {mine} | {other} | {goal} |")


if __name__ == "__main__":
    main()
