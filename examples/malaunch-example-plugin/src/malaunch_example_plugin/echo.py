"""The ``echo`` framework: a pure function from topology, command and options to a plan."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from malaunch.api import LaunchPlan, PlanOptions, ProcessSpec, Topology, UsageError

NAME = "echo"


def plan(topology: Topology, command: Sequence[str], options: PlanOptions) -> LaunchPlan:
    """One process per device of this node, told its rank through ``ECHO_*`` variables."""
    if not command:
        raise UsageError("echo: no command given")
    devices = topology.local_devices  # in rank order: local rank = position
    if not devices:
        msg = f"echo: topology source {topology.source!r} lists no devices on this node"
        raise UsageError(msg)
    # The launch directory comes with the options, never from Path.cwd(): a plan is a pure
    # function of its inputs (a dry run or a test may plan for another directory).
    base = Path(options.cwd)
    log_dir = base / options.log_dir  # an absolute log dir replaces base
    greeting = options.framework_options["echo_greeting"]
    processes = []
    for local_rank, device in enumerate(devices):
        env = {
            "ECHO_RANK": str(device.rank),
            "ECHO_LOCAL_RANK": str(local_rank),
            "ECHO_WORLD_SIZE": str(topology.world_size),
            "ECHO_MASTER": f"{topology.master_addr}:{topology.master_port or 0}",
        }
        if greeting is not None:
            env["ECHO_GREETING"] = str(greeting)
        processes.append(
            ProcessSpec(
                role="worker",
                rank=device.rank,
                local_rank=local_rank,
                argv=tuple(command),
                env=env,
                cwd=str(base),
                log_file=str(log_dir / f"echo-{device.rank}.log"),
            )
        )
    return LaunchPlan(framework=NAME, topology=topology, processes=tuple(processes))
