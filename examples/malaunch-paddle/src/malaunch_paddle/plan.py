"""The ``paddle`` framework: a pure function from topology, command and options to a plan.

Each trainer (one per device of this node, in rank order) gets what
``python -m paddle.distributed.launch`` gives it in collective mode:

- ``PADDLE_TRAINER_ID``: its global rank; ``PADDLE_TRAINERS_NUM``: the world size;
- ``PADDLE_TRAINER_ENDPOINTS``: every trainer's ``host:port``, in rank order (rank 0 sends the
  communicator id to the others there); ``PADDLE_CURRENT_ENDPOINT``: its own;
- ``PADDLE_RANK_IN_NODE``: its local rank; ``FLAGS_selected_gpus``: its device's in-container
  index.

The trainers of a node listen on consecutive ports from ``--paddle-start-port``. Node 0's
launcher serves malaunch's job channel on the job port (``PlanOptions.job_port``), so a range
on node 0 that holds it is refused before anything starts, on every node alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

from malaunch.api import (
    LaunchPlan,
    Node,
    PlanOptions,
    ProcessSpec,
    Topology,
    UsageError,
    format_host_port,
)

NAME = "paddle"
DEFAULT_START_PORT = 6170  # paddle.distributed.launch's --started_port
LAUNCHER_VARS = (
    "PADDLE_TRAINER_ID",
    "PADDLE_TRAINERS_NUM",
    "PADDLE_TRAINER_ENDPOINTS",
    "PADDLE_CURRENT_ENDPOINT",
)
# The kernel takes at most 128 KiB for one variable (MAX_ARG_STRLEN): a longer endpoint list
# would make every trainer's exec fail.
MAX_ENDPOINTS_TEXT = 120_000


def plan(topology: Topology, command: Sequence[str], options: PlanOptions) -> LaunchPlan:
    """One trainer per device of this node, told the whole job's endpoints."""
    if not command:
        raise UsageError("paddle: no command given: malaunch --framework paddle -- python x.py")
    start = int(options.framework_options["paddle_start_port"])
    check_job_port(topology, start, options.job_port)
    endpoints = trainer_endpoints(topology, start)
    joined = ",".join(endpoints)
    if len(joined) > MAX_ENDPOINTS_TEXT:
        msg = (
            f"paddle: {len(endpoints)} trainers make PADDLE_TRAINER_ENDPOINTS "
            f"{len(joined)} characters long, more than one variable can hold"
        )
        raise UsageError(msg)
    base = Path(options.cwd)
    log_dir = base / options.log_dir  # an absolute log dir replaces base
    processes = []
    for local_rank, device in enumerate(topology.local_devices):
        env: Dict[str, str] = {
            "PADDLE_TRAINER_ID": str(device.rank),
            "PADDLE_TRAINERS_NUM": str(topology.world_size),
            "PADDLE_TRAINER_ENDPOINTS": joined,
            "PADDLE_CURRENT_ENDPOINT": endpoints[device.rank],
            "PADDLE_RANK_IN_NODE": str(local_rank),
            "FLAGS_selected_gpus": str(device.local_index),
        }
        processes.append(
            ProcessSpec(
                role="trainer",
                rank=device.rank,
                local_rank=local_rank,
                argv=tuple(command),
                env=env,
                cwd=str(base),
                log_file=str(log_dir / f"trainer-{device.rank}.log"),
            )
        )
    if not processes:
        msg = f"paddle: topology source {topology.source!r} lists no devices on this node"
        raise UsageError(msg)
    return LaunchPlan(framework=NAME, topology=topology, processes=tuple(processes))


def ports_of(node: Node, start: int) -> range:
    """The ports ``node``'s trainers listen on."""
    return range(start, start + len(node.devices))


def trainer_endpoints(topology: Topology, start: int) -> List[str]:
    """Every trainer's ``host:port``, indexed by rank (ranks are 0..world_size-1)."""
    by_rank: Dict[int, str] = {}
    for node in topology.nodes:
        ports = ports_of(node, start)
        if ports and ports[-1] > 65535:
            msg = (
                f"--paddle-start-port {start}: the {len(ports)} trainers of node {node.index} "
                f"would listen up to port {ports[-1]}, past 65535"
            )
            raise UsageError(msg)
        devices = sorted(node.devices, key=lambda device: device.rank)
        for port, device in zip(ports, devices):
            by_rank[device.rank] = format_host_port(node.host, port)
    return [by_rank[rank] for rank in sorted(by_rank)]


def check_job_port(topology: Topology, start: int, job_port: Optional[int]) -> None:
    """Node 0's trainers must leave the job port to node 0's launcher."""
    if job_port is None:
        return  # no job channel: one node, or switched off
    ports = ports_of(topology.nodes[0], start)
    if job_port in ports:
        msg = (
            f"--paddle-start-port {start}: the trainers of node 0 would listen on ports "
            f"{ports[0]}-{ports[-1]}, which hold the job port {job_port} (node 0's launcher "
            f"serves the job channel there); give --paddle-start-port {job_port + 1}, or a "
            f"--job-port outside {ports[0]}-{ports[-1]}"
        )
        raise UsageError(msg)
