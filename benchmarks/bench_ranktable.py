"""How long the rank-table source takes on a large job, and how fast ``malaunch`` starts.

    .venv/bin/python benchmarks/bench_ranktable.py [--runs N] [--servers 1024]

Generates a template-2 table of ``--servers`` servers x 8 devices (instances in shuffled
order) in a temporary folder, then times, in-process through the public API:

- ``convert_file``: read + parse + validate + convert + write the v1.0 file (goal <= 50 ms),
- ``describe_file``: read + parse + validate + summary,
- ``resolve``: the whole source (wait/confirm read, identity, conversion, write, Topology);
  this includes the confirm read's pause of ``MIN_POLL`` seconds,
- ``resolve + plan``: that, then the ``torch_ddp`` plan of server 517's ranks
  (:func:`malaunch.pipeline.build_plan`, the launch's own path: read, converted, planned),

plus a breakdown of the phases, and ``malaunch --help`` / ``malaunch ranktable validate``
as subprocesses. Prints the median of each.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from malaunch.models import PlanOptions, ResolveOptions
from malaunch.pipeline import build_plan
from malaunch.plugins import load_plugins
from malaunch.topology.ranktable import source
from malaunch.topology.ranktable.formats import parse_table
from malaunch.topology.ranktable.read import MIN_POLL
from malaunch.topology.ranktable.write import v1_text

SERVERS = 1024
DEVICES = 8
JOB = "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001"


def big_table(servers: int = SERVERS, devices: int = DEVICES) -> Dict[str, Any]:
    """A completed template-2 table; instances shuffled as hccl-controller caches them."""
    instances = [
        {
            "pod_name": f"{JOB}-worker-{n}",
            "server_id": f"10.{n // 250}.{n % 250}.1",
            "devices": [
                {"device_id": str(d), "device_ip": f"100.64.{n // 32}.{(n % 32) * 8 + d}"}
                for d in range(devices)
            ],
        }
        for n in range(servers)
    ]
    random.Random(42).shuffle(instances)
    group = {
        "group_name": "worker",
        "device_count": str(servers * devices),
        "instance_count": str(servers),
        "instance_list": instances,
    }
    return {"status": "completed", "group_count": "1", "group_list": [group]}


def timed(action: Callable[[], object], runs: int) -> Tuple[float, float, float]:
    """(median wall ms, median CPU ms, min wall ms) over ``runs`` after one warm-up run.

    The machine is shared: wall time includes waiting for a core, CPU time does not, so both
    are printed.
    """
    action()  # warm-up: imports, caches
    wall: List[float] = []
    cpu: List[float] = []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        action()
        cpu.append((time.process_time() - start_cpu) * 1000)
        wall.append((time.perf_counter() - start) * 1000)
    return statistics.median(wall), statistics.median(cpu), min(wall)


def run_command(args: List[str]) -> None:
    subprocess.run(args, check=True, capture_output=True)


def measure(folder: Path, runs: int, servers: int) -> List[Tuple[str, Tuple[float, float, float]]]:
    table_file = folder / "jobstart_hccl.json"
    table_file.write_text(json.dumps(big_table(servers), indent=4))
    target = folder / "converted.json"
    raw = table_file.read_bytes()
    data = json.loads(raw)
    table = parse_table(data, "bench")
    options = ResolveOptions(wait_timeout=0, poll_interval=0, log_dir=str(folder / "logs"))
    env = {"RANK_TABLE_FILE": str(folder), "MA_CURRENT_INSTANCE_NAME": f"{JOB}-worker-517"}
    node_rank = source.resolve(env, options).node_rank
    assert table.servers[node_rank].pod_name == f"{JOB}-worker-517"
    exe = str(Path(sys.executable).with_name("malaunch"))

    def convert() -> object:
        return source.convert_file(table_file, target)

    def describe() -> object:
        return source.describe_file(table_file)

    def resolve() -> object:
        return source.resolve(env, options)

    plugins = load_plugins({})
    plan_options = PlanOptions(log_dir=str(folder / "logs"), cwd=str(folder))

    def plan() -> object:
        return build_plan(
            plugins,
            env,
            framework="torch_ddp",
            source="ranktable",
            command=["python", "train.py"],
            resolve_options=options,
            plan_options=plan_options,
        )

    def build() -> object:
        return source.build_topology(table, node_rank, env, str(target))

    def validate() -> None:
        run_command([exe, "ranktable", "validate", str(table_file)])

    sub_runs = max(3, runs // 3)
    return [
        ("convert_file: read+parse+validate+convert+write", timed(convert, runs)),
        ("describe_file: read+parse+validate+summary", timed(describe, runs)),
        (f"resolve: all, incl. {MIN_POLL * 1000:.0f} ms confirm pause", timed(resolve, runs)),
        ("resolve + plan (torch_ddp, 8 ranks of server 517)", timed(plan, runs)),
        ("  json.loads", timed(lambda: json.loads(raw), runs)),
        ("  parse + validate + order", timed(lambda: parse_table(data, "bench"), runs)),
        ("  v1 text", timed(lambda: v1_text(table), runs)),
        ("  build Topology (pydantic)", timed(build, runs)),
        ("malaunch --help (subprocess)", timed(lambda: run_command([exe, "--help"]), sub_runs)),
        ("malaunch ranktable validate (subprocess)", timed(validate, sub_runs)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per measurement")
    parser.add_argument("--servers", type=int, default=SERVERS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ranktable-") as folder:
        rows = measure(Path(folder), args.runs, args.servers)
    print(f"template 2 rank table, {args.servers} servers x {DEVICES} devices; {args.runs} runs")
    width = max(len(name) for name, _ in rows)
    print(f"{'':<{width}}  {'wall med':>9}  {'cpu med':>9}  {'wall min':>9}")
    for name, (wall, cpu, fastest) in rows:
        print(f"{name:<{width}}  {wall:6.1f} ms  {cpu:6.1f} ms  {fastest:6.1f} ms")


if __name__ == "__main__":
    main()
