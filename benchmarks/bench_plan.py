"""Plan building: ``malaunch --dry-run`` of many local processes, as a whole command.

    .venv/bin/python benchmarks/bench_plan.py [--reps N]

Plan building must be linear in the number of local processes (hostile-input issue: it was
quadratic, 6.3 s for 10,000). Prints a markdown table of the median wall time of the installed
command per framework and process count. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List

MALAUNCH = str(Path(sys.executable).with_name("malaunch"))
COUNTS = (1_000, 10_000)
FRAMEWORKS = {
    "torch_ddp": ["--framework", "torch_ddp", "--nproc-per-node", "{n}"],
    "mindspore (dynamic)": ["--framework", "mindspore", "--nproc-per-node", "{n}"],
}
# tensorflow_ps's local mode is left out: every task's TF_CONFIG lists the whole cluster, so its
# plan grows with the square of the task count by nature, and --num-workers stops at 512.


def one_run(options: List[str], n: int, folder: str) -> float:
    argv = [MALAUNCH, "--topology", "local", "--log-dir", folder, "--dry-run"]
    argv += [part.format(n=n) for part in options] + ["--", "python", "train.py"]
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=folder)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print("| framework | " + " | ".join(f"{n:,} processes" for n in COUNTS) + " | goal |")
    print("|---|" + "---|" * len(COUNTS) + "---|")
    with tempfile.TemporaryDirectory() as folder:
        for name, options in FRAMEWORKS.items():
            cells = []
            for n in COUNTS:
                times = [one_run(options, n, folder) for _ in range(args.reps)]
                cells.append(f"{statistics.median(times):.2f} s")
            print(f"| {name} | " + " | ".join(cells) + " | 10,000 in <= 1 s |")


if __name__ == "__main__":
    main()
