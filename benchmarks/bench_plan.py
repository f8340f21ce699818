"""Plan building: ``malaunch --dry-run`` of many local processes, as a whole command.

    .venv/bin/python benchmarks/bench_plan.py [--reps N] [--only local,scale]

Plan building must be linear in the number of local processes (hostile-input issue: it was
quadratic, 6.3 s for 10,000). Prints a markdown table of the median wall time of the installed
command per framework and process count. Then (``scale``), the installed command as a whole at
cluster size: node 0's ``--dry-run`` of a 10,000-node Volcano job (its host file lists the
nodes), the ``--dry-run`` of server 517 of a 4,096-server x 8-device rank table (read,
converted to v1.0, planned), and ``malaunch simulate`` of 16 nodes x 4 ranks that exit 0 at
once (16 launchers joined by the job channel, 64 ranks). Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ranktable import JOB, big_table

MALAUNCH = str(Path(sys.executable).with_name("malaunch"))
POD = f"{JOB}-worker-517"
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


def timed(argv: List[str], env: Dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    return time.perf_counter() - started


def volcano_node_0(folder: Path) -> float:
    platform = folder / "volcano"
    platform.mkdir(exist_ok=True)
    hosts = ["127.0.0.1"] + [f"10.{i // 250}.{i % 250}.1" for i in range(1, 10_000)]
    (platform / "worker.host").write_text("\n".join(hosts))
    env = {**base_env(), "MALAUNCH_VOLCANO_DIR": str(platform), "VC_TASK_INDEX": "0"}
    argv = [MALAUNCH, "--framework", "torch_ddp", "--topology", "volcano", "--nproc-per-node",
            "8", "--master-port", "29500", "--log-dir", str(folder / "logs"), "--dry-run", "--",
            "python", "train.py"]  # fmt: skip
    return timed(argv, env, folder)


def rank_table_4096(folder: Path) -> float:
    table = folder / "table"
    table.mkdir(exist_ok=True)
    (table / "jobstart_hccl.json").write_text(json.dumps(big_table(4096)))
    env = {**base_env(), "RANK_TABLE_FILE": str(table), "MA_CURRENT_INSTANCE_NAME": POD}
    argv = [MALAUNCH, "--framework", "torch_ddp", "--topology", "ranktable", "--log-dir",
            str(folder / "logs"), "--dry-run", "--", "python", "train.py"]  # fmt: skip
    return timed(argv, env, folder)


def simulate_16x4(folder: Path) -> float:
    argv = [MALAUNCH, "simulate", "--nodes", "16", "--nproc-per-node", "4", "--framework",
            "torch_ddp", "--log-dir", str(folder / "sim"), "--console-ranks", "none", "--",
            sys.executable, "-S", "-c", "pass"]  # fmt: skip
    return timed(argv, base_env(), folder)


# (what, how, goal)
SCALE: List[Tuple[str, Callable[[Path], float], str]] = [
    ("node 0's plan of a 10,000-node job (volcano, 8 ranks a node), `--dry-run`",
     volcano_node_0, ""),
    ("a 4,096-server rank table: read, converted, planned, `--dry-run`", rank_table_4096,
     "<= 0.5 s"),
    ("`simulate` 16 nodes x 4 ranks, whole", simulate_16x4, "<= 5 s"),
]  # fmt: skip


def base_env() -> Dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")
    return {key: os.environ[key] for key in keep if key in os.environ}


def scale(reps: int) -> None:
    print("| at cluster scale, the installed command | median | runs | goal |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for name, run, goal in SCALE:
            times = [run(Path(folder)) for _ in range(reps)]
            each = ", ".join(f"{t:.2f}" for t in times)
            print(f"| {name} | {statistics.median(times):.2f} s | {each} | {goal} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default="local,scale")
    args = parser.parse_args()
    if "scale" in args.only.split(","):
        scale(args.reps)
    if "local" not in args.only.split(","):
        return
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
