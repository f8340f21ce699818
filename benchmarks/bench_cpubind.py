"""CPU binding benchmark: a memory-bandwidth-bound job, ``--cpu-bind none`` against ``even``.

    .venv/bin/python benchmarks/bench_cpubind.py [--reps 5] [--elements 8388608] [--iters 30]

Each run starts 2 ranks through the installed ``malaunch --framework torch_ddp --topology
local --nproc-per-node 2 --cpu-bind MODE``. Every rank runs a STREAM-like triad in numpy
(``a = b + s * c`` over arrays far larger than any cache; numpy makes it two passes,
``a = s * c`` then ``a += b``), after a file barrier so that both ranks run it at the same
time, and reports the time of each iteration, its CPU affinity, and how often during the timed
loop the kernel moved it to another CPU and preempted it (``se.nr_migrations`` and
``nr_involuntary_switches`` in ``/proc/self/sched``).
Bandwidth is counted as STREAM counts the triad: 24 bytes per element (read b and c, write a).
Modes alternate within each repetition, so a change of load on a shared machine hits both.

Prints a markdown table: bandwidth is the median over ranks and ``--reps`` of each rank's
median (and best) iteration; moves and preemptions are means per rank and run. Nothing here
asserts a speed: this is a measurement, the tests are in tests/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List

MALAUNCH = str(Path(sys.executable).with_name("malaunch"))

WORKER = r"""
import json, os, sys, time
import numpy as np

folder, elements, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])

def counters():
    # (moves to another CPU, involuntary context switches) of this thread so far
    found = {}
    with open("/proc/self/sched") as handle:
        for line in handle:
            name, _, value = line.partition(":")
            found[name.strip()] = value.strip()
    return int(found.get("se.nr_migrations", -1)), int(found.get("nr_involuntary_switches", -1))

a = np.zeros(elements)
b = np.full(elements, 1.0)
c = np.full(elements, 2.0)
np.multiply(c, 3.0, out=a)  # touch every page before timing
np.add(a, b, out=a)
open(os.path.join(folder, "ready-%d" % rank), "w").close()
while len([n for n in os.listdir(folder) if n.startswith("ready-")]) < world:
    time.sleep(0.001)
before = counters()
times = []
for _ in range(iters):
    start = time.perf_counter()
    np.multiply(c, 3.0, out=a)
    np.add(a, b, out=a)
    times.append(time.perf_counter() - start)
report = {
    "rank": rank,
    "cpus": sorted(os.sched_getaffinity(0)),
    "times": times,
    "migrations": counters()[0] - before[0],
    "preempted": counters()[1] - before[1],
}
with open(os.path.join(folder, "rank-%d.json" % rank), "w") as handle:
    json.dump(report, handle)
"""


def run_once(work: Path, mode: str, nproc: int, elements: int, iters: int) -> List[Dict[str, Any]]:
    """One launch; the ranks' reports."""
    folder = Path(tempfile.mkdtemp(dir=work))
    worker = work / "triad.py"
    command = [
        MALAUNCH, "--framework", "torch_ddp", "--topology", "local",
        "--nproc-per-node", str(nproc), "--cpu-bind", mode, "--console-ranks", "none",
        "--log-dir", str(folder / "logs"), "--",
        sys.executable, str(worker), str(folder), str(elements), str(iters),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALAUNCH_")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"malaunch failed ({done.returncode}): {done.stderr}")
    return [json.loads((folder / f"rank-{r}.json").read_text()) for r in range(nproc)]


def gbps(seconds: float, elements: int) -> float:
    return 24 * elements / seconds / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--elements", type=int, default=1 << 23)  # 64 MiB per array
    parser.add_argument("--iters", type=int, default=30)
    args = parser.parse_args()
    rows = [("none", 1), ("none", 2), ("even", 2)]
    results: Dict[Any, Dict[str, List[float]]] = {row: {} for row in rows}
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        (work / "triad.py").write_text(WORKER)
        for rep in range(args.reps):
            order = rows if rep % 2 == 0 else [rows[0], rows[2], rows[1]]
            for mode, nproc in order:
                for report in run_once(work, mode, nproc, args.elements, args.iters):
                    cell = results[(mode, nproc)]
                    times = report["times"]
                    cell.setdefault("median", []).append(
                        gbps(statistics.median(times), args.elements)
                    )
                    cell.setdefault("best", []).append(gbps(min(times), args.elements))
                    cell.setdefault("spread", []).append(max(times) / min(times))
                    cell.setdefault("migrations", []).append(report["migrations"])
                    cell.setdefault("preempted", []).append(report["preempted"])
                    cell.setdefault("cpus", []).append(len(report["cpus"]))
    print(f"triad, {args.elements} doubles per array, {args.iters} iterations, {args.reps} reps")
    print("| mode | ranks | GB/s per rank (median) | best | slowest/fastest iteration | "
          "CPU moves per rank (mean) | preemptions per rank (mean) | CPUs per rank |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for mode, nproc in rows:
        cell = results[(mode, nproc)]
        cells = [
            f"{statistics.median(cell['median']):.2f}",
            f"{statistics.median(cell['best']):.2f}",
            f"{statistics.median(cell['spread']):.2f}",
            f"{statistics.mean(cell['migrations']):.1f}",
            f"{statistics.mean(cell['preempted']):.0f}",
            f"{statistics.median(cell['cpus']):.0f}",
        ]
        print(f"| {mode} | {nproc} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
