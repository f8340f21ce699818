"""The job channel at cluster scale: one real node-0 launcher serving N nodes on one machine.

    .venv/bin/python benchmarks/bench_channel.py [--nodes 1000,4000,10000] [--reps 3]
        [--swarms 4] [--steady 30] [--hang] [--json OUT] [--work DIR]

Node 0 is the installed ``malaunch --topology volcano`` of a job of N nodes (the svc plugin's
host file lists them), one rank each; its rank sleeps. The other N-1 nodes are played by
``tests/workers/node_swarm.py`` in ``--swarms`` processes: real sockets from an address of
each node's own (127.1.x.y), the real handshake and token (from ``malaunch.job.protocol`` and
``malaunch.job.settings``), node 0's heartbeats answered, ``ready``, ``ended`` and stacks
reported as a node launcher does. Measured (tests/e2e/swarm.py drives it):

- **join**: the first client's connect to node 0 starting attempt 0 (the start its run
  manifest records), and to the last client hearing ``start``;
- **CPU**: node 0's user + system time over ``--steady`` seconds of heartbeats alone, from
  ``/proc/<pid>/stat``, as a percentage of one core;
- **RSS**: node 0's peak resident memory (``VmHWM``), read until it exits;
- **stop**: the last node reports a failed rank; the time to the last client receiving ``stop``;
- **hang** (``--hang``, with ``--max-restarts 1``): node 1 reports a silent rank; node 0 asks
  every node for its stacks (its own rank's by py-spy), names the odd one out and restarts the
  job: the time from the report to the last client receiving that ``stop``. The failure is
  then measured on attempt 1.

``--json OUT`` writes one object for the last run, with the issue's keys (``nodes``,
``nodes_joined``, ``join_s``, ``node0_cpu_pct``, ``node0_rss_mb``, ``stop_s``, ``node0_pid``,
``node0_log_dir``), and ``runs``: every run's. The work folder is then kept, so that node 0's
run folder can be read (its summary's ``nodes`` is the job's N, ``stopped_by`` the failed
node). Nothing here asserts a time: the behaviour is tested in tests/e2e/test_job_scale.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from swarm import SwarmJob

from malaunch.testing import run_dir

RANK = [sys.executable, "-S", "-c", "import time; time.sleep(3600)"]
TICK = os.sysconf("SC_CLK_TCK")
HEADER = (
    "| nodes | join -> attempt 0 | node 0 CPU, steady | node 0 peak RSS | failure -> last stop "
    "| hang -> last stop |"
)


def cpu_seconds(pid: int) -> float:
    """User + system time of one process (not its children), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class PeakMemory:
    """Node 0's VmHWM, read every 0.2 s until it exits: the last value read is its peak."""

    def __init__(self, pid: int) -> None:
        self.path = Path(f"/proc/{pid}/status")
        self.kib = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(0.2):
            try:
                lines = self.path.read_text().splitlines()
            except OSError:
                return
            for line in lines:
                if line.startswith("VmHWM:"):
                    self.kib = max(self.kib, int(line.split()[1]))

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return round(self.kib / 1024, 1)


def stamp(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso).timestamp()


def read_manifest(log_dir: Path) -> Dict[str, Any]:
    """Node 0's run manifest once attempt 0 is in it (written just after the start is sent)."""
    deadline = time.monotonic() + 30
    while True:
        path = run_dir(log_dir) / "malaunch-run.json"
        if path.exists():
            manifest: Dict[str, Any] = json.loads(path.read_text())
            if manifest.get("attempts"):
                return manifest
        if time.monotonic() > deadline:
            raise RuntimeError(f"no attempt in {path}")
        time.sleep(0.05)


def steady_cpu(pid: int, seconds: float) -> float:
    before, since = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return round(100 * (cpu_seconds(pid) - before) / (time.monotonic() - since), 2)


def hang_round(job: SwarmJob) -> float:
    """Node 1 reports a hang; seconds until every node has the stop that restarts the job."""
    job.tell("hang 1")
    sent = float(job.wait("sent", 30, count=1)[0]["at"])
    stopped = job.wait("stopped", 120, attempt=0)
    job.wait("started", 120, attempt=1)
    return round(float(max(e["last"] for e in stopped)) - sent, 3)


def one_run(nodes: int, args: argparse.Namespace, work: Path) -> Dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"n{nodes}-", dir=work))
    options = ["--grace-period", "2", "--wait-timeout", "300"]
    if args.hang:
        options += ["--hang-timeout", "3600", "--hang-stacks", "py-spy"]
        options += ["--max-restarts", "1", "--restart-backoff", "0"]
    result: Dict[str, Any] = {"nodes": nodes, "load_before": round(os.getloadavg()[0], 2)}
    with SwarmJob(root, nodes, swarms=args.swarms) as job:
        job.start_node_0(options, RANK)
        assert job.node0 is not None
        pid = job.node0.pid
        job.wait_listening()
        job.start_swarms()
        memory = PeakMemory(pid)
        job.tell("go")
        started = job.wait("started", 600, attempt=0)
        first = min(e["first_connect"] for e in job.wait("joined", 10))
        joined = job.status()["states"].get("joined", 0)
        manifest = read_manifest(job.log_dir)
        result.update(
            nodes_joined=joined + 1,  # node 0 itself
            join_s=round(stamp(manifest["attempts"][0]["started"]) - first, 3),
            start_reached_s=round(max(e["last"] for e in started) - first, 3),
            heartbeat_interval_s=job.settings.heartbeat_interval,
        )
        time.sleep(job.settings.heartbeat_interval + 1)  # the joins' work is over
        result["node0_cpu_pct"] = steady_cpu(pid, args.steady)
        attempt = 0
        if args.hang:
            result["hang_s"] = hang_round(job)
            attempt = 1
        job.tell(f"fail {nodes - 1}")
        sent = job.wait("sent", 30, count=1)[0]["at"]
        stopped = job.wait("stopped", 120, attempt=attempt)
        result["stop_s"] = round(max(e["last"] for e in stopped) - sent, 3)
        result["stop_first_s"] = round(min(e["first"] for e in stopped) - sent, 3)
        result["node0_exit"] = job.node0.wait(timeout=120)
        result["node0_rss_mb"] = memory.stop()
        folder = run_dir(job.log_dir)
        summary = json.loads((folder / "malaunch-summary.json").read_text())
        result.update(
            node0_pid=pid,
            node0_log_dir=str(folder),
            summary_nodes=summary["nodes"],  # the job's node count, as node 0's summary says
            summary_stopped_by=summary.get("stopped_by"),
        )
    return result


def cell(runs: List[Dict[str, Any]], key: str, unit: str) -> str:
    values = [run[key] for run in runs if run.get(key) is not None]
    if not values:
        return "n/a"
    each = ", ".join(f"{v:g}" for v in values)
    return f"{statistics.median(values):g} {unit} ({each})" if len(values) > 1 else f"{each} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", default="1000,4000,10000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--swarms", type=int, default=4, help="processes playing the nodes")
    parser.add_argument("--steady", type=float, default=30.0, help="seconds of heartbeats")
    parser.add_argument("--hang", action="store_true", help="measure a hang's stack fan-in")
    parser.add_argument("--json", help="write the last run's figures (and every run's) here")
    parser.add_argument("--work", help="folder for the runs (default: a temporary one)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-channel-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: List[Dict[str, Any]] = []
    rows = [HEADER, "|---|---|---|---|---|---|"]
    try:
        for nodes in (int(n) for n in args.nodes.split(",")):
            mine = []
            for _ in range(args.reps):
                mine.append(one_run(nodes, args, work))
                print(json.dumps(mine[-1]), file=sys.stderr)
            runs += mine
            cells = [cell(mine, "join_s", "s"), cell(mine, "node0_cpu_pct", "%"),
                     cell(mine, "node0_rss_mb", "MB"), cell(mine, "stop_s", "s"),
                     cell(mine, "hang_s", "s")]  # fmt: skip
            rows.append(f"| {nodes:,} | " + " | ".join(cells) + " |")
    finally:
        print("\n".join(rows))
        if args.json and runs:
            Path(args.json).write_text(json.dumps({**runs[-1], "runs": runs}, indent=2) + "\n")
            print(f"runs kept in {work}")
        elif not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
