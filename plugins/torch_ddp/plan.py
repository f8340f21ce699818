"""The torch_ddp plan: per-rank torchrun-style environment, or one torchrun agent per node.

Native mode gives each rank what torch 2.13's agent (``LocalElasticAgent._start_workers``)
gives a worker, so that ``torch.distributed.is_torchelastic_launched()`` and the libraries
that pick their cluster environment from it (PyTorch Lightning) see torchrun; the table of
``docs/plugins.md`` lists each variable and where malaunch's value differs. Pure functions of
the topology, the command and the options; torch is never imported.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List, Mapping, Sequence

from malaunch.api import (
    Device,
    LaunchPlan,
    PlanOptions,
    ProcessSpec,
    Target,
    Topology,
    UsageError,
    is_python,
    parse_python_command,
)

FRAMEWORK = "torch_ddp"
MODES = ("native", "delegate")
DEFAULT_MASTER_PORT = 29500  # torchrun's default
STATIC_RUN_ID = "none"  # torchrun's --rdzv-id default, its run id without one
ERROR_FILE_VAR = "TORCHELASTIC_ERROR_FILE"
RESTART_COUNT_VAR = "TORCHELASTIC_RESTART_COUNT"
ASYNC_ERRORS_VAR = "TORCH_NCCL_ASYNC_ERROR_HANDLING"


def plan(topology: Topology, command: Sequence[str], options: PlanOptions) -> LaunchPlan:
    """Plan this node's processes; ``--torch-mode`` picks native (default) or delegate."""
    if not command:
        msg = "torch_ddp: no command given: malaunch --framework torch_ddp -- python train.py"
        raise UsageError(msg)
    mode = options.framework_options["torch_mode"]
    if mode not in MODES:
        msg = f"--torch-mode {mode!r}: expected one of {', '.join(MODES)}"
        raise UsageError(msg)
    base = Path(options.cwd)
    if mode == "native":
        processes = native_processes(topology, command, options, base)
    else:
        processes = [delegate_process(topology, command, options, base)]
    return LaunchPlan(framework=FRAMEWORK, topology=topology, processes=tuple(processes))


def local_devices(topology: Topology) -> List[Device]:
    """This node's devices in rank order (one rank each)."""
    devices = list(topology.local_devices)
    if not devices:
        msg = (
            f"torch_ddp: topology source {topology.source!r} lists no devices on node "
            f"{topology.node_rank} ({topology.this_node.host}); try --nproc-per-node"
        )
        raise UsageError(msg)
    return devices


def master_port(topology: Topology) -> int:
    return topology.master_port or DEFAULT_MASTER_PORT


def rank_table_env(topology: Topology, framework_options: Mapping[str, object]) -> Dict[str, str]:
    """``RANK_TABLE_FILE`` only on request: it switches torch_npu to rank-table init."""
    if topology.rank_table_file and framework_options["export_rank_table"]:
        return {"RANK_TABLE_FILE": topology.rank_table_file}
    return {}


def native_env(
    topology: Topology, device: Device, local_rank: int, local_world_size: int
) -> Dict[str, str]:
    """What torchrun's agent gives one worker (static rendezvous, no restarts)."""
    world = str(topology.world_size)
    env = {
        "RANK": str(device.rank),
        "LOCAL_RANK": str(local_rank),
        "WORLD_SIZE": world,
        "LOCAL_WORLD_SIZE": str(local_world_size),
        "GROUP_RANK": str(topology.node_rank),
        "NODE_RANK": str(topology.node_rank),
        "GROUP_WORLD_SIZE": str(topology.nnodes),
        "ROLE_NAME": "default",
        "ROLE_RANK": str(device.rank),
        "ROLE_WORLD_SIZE": world,
        "MASTER_ADDR": topology.master_addr,
        "MASTER_PORT": str(master_port(topology)),
    }
    if topology.rank_table_file:
        # The rank table says which NPU holds this rank: its in-container index.
        env["DEVICE_ID"] = env["ASCEND_DEVICE_ID"] = str(device.local_index)
    return env


def elastic_env(topology: Topology, options: PlanOptions) -> Dict[str, str]:
    """The rest of torchrun's worker contract, with native mode's values.

    ``TORCHELASTIC_RESTART_COUNT`` is the attempt: the launcher sets it at each start
    (``ProcessSpec.attempt_env``); ``0`` here is the first. No agent hosts a store, so
    ``TORCHELASTIC_USE_AGENT_STORE`` is False and rank 0's ``init_process_group`` serves the
    TCPStore on ``MASTER_PORT``, as it does without torchrun.
    """
    env = {
        "TORCHELASTIC_RUN_ID": topology.job_id or STATIC_RUN_ID,
        RESTART_COUNT_VAR: "0",
        "TORCHELASTIC_MAX_RESTARTS": str(options.max_restarts),
        "TORCHELASTIC_USE_AGENT_STORE": "False",
    }
    if ASYNC_ERRORS_VAR not in options.environ:
        env[ASYNC_ERRORS_VAR] = "1"  # torchrun's default; a value set here is inherited
    return env


def native_processes(
    topology: Topology, command: Sequence[str], options: PlanOptions, base: Path
) -> List[ProcessSpec]:
    """One process per local rank, in rank order, each with its own error file."""
    devices = local_devices(topology)
    log_dir = base / options.log_dir
    common = {
        **rank_table_env(topology, options.framework_options),
        **elastic_env(topology, options),
    }
    if "OMP_NUM_THREADS" not in options.environ and len(devices) > 1:
        common["OMP_NUM_THREADS"] = "1"  # as torchrun does, so ranks do not oversubscribe
    processes = []
    for local_rank, device in enumerate(devices):
        error_file = str(log_dir / f"worker-{device.rank}.error.json")
        env = {**common, **native_env(topology, device, local_rank, len(devices))}
        env[ERROR_FILE_VAR] = error_file
        processes.append(
            ProcessSpec(
                role="worker",
                rank=device.rank,
                local_rank=local_rank,
                argv=tuple(command),
                env=env,
                cwd=str(base),
                log_file=str(log_dir / f"worker-{device.rank}.log"),
                attempt_env=(RESTART_COUNT_VAR,),
                error_file=error_file,
            )
        )
    return processes


def torchrun_tail(command: Sequence[str]) -> List[str]:
    """What follows torchrun's own options: ``[-m] script args`` or ``--no-python prog args``.

    Interpreter options of the user's command (``python -u``) are dropped: torchrun starts
    its workers with ``python -u`` itself.
    """
    parsed = parse_python_command(command)
    if parsed is None:
        return ["--no-python", *command]
    if parsed.target is Target.MODULE and parsed.module:
        return ["-m", parsed.module, *parsed.program_args]
    if parsed.target is Target.SCRIPT:
        return [parsed.argv[parsed.index], *parsed.program_args]
    msg = (
        "torch_ddp --torch-mode delegate: expected `python [options] script.py ...` or "
        f"`python -m module ...`, got {list(command)}"
    )
    raise UsageError(msg)


def delegate_argv(topology: Topology, command: Sequence[str], nproc: int) -> List[str]:
    """``python -m torch.distributed.run`` with this node's static rendezvous options.

    The agent runs under the command's interpreter when the command starts with one (so the
    training environment's torch is used); otherwise under the launcher's interpreter, with
    ``--no-python`` so torchrun executes the program directly.
    """
    python = command[0] if is_python(command[0]) else sys.executable
    return [
        python, "-m", "torch.distributed.run",
        "--nproc-per-node", str(nproc),
        "--nnodes", str(topology.nnodes),
        "--node-rank", str(topology.node_rank),
        "--master-addr", topology.master_addr,
        "--master-port", str(master_port(topology)),
        *torchrun_tail(command),
    ]  # fmt: skip


def delegate_process(
    topology: Topology, command: Sequence[str], options: PlanOptions, base: Path
) -> ProcessSpec:
    """One torchrun agent for this node; its workers get their env from torchrun."""
    devices = local_devices(topology)
    first = topology.node_rank * len(devices)
    expected = list(range(first, first + len(devices)))
    if [d.rank for d in devices] != expected or any(
        len(node.devices) != len(devices) for node in topology.nodes
    ):
        msg = (
            "torch_ddp --torch-mode delegate: torchrun numbers ranks node by node with the "
            f"same count per node, but this topology ({topology.source}) gives node "
            f"{topology.node_rank} ranks {[d.rank for d in devices]}; use --torch-mode native"
        )
        raise UsageError(msg)
    # torchrun's own main is decorated with @record: given an error file, it copies the
    # first failed worker's structured error there.
    log_dir = base / options.log_dir
    error_file = str(log_dir / f"torchrun-node-{topology.node_rank}.error.json")
    return ProcessSpec(
        role="torchrun",
        rank=first,
        local_rank=0,
        argv=tuple(delegate_argv(topology, command, len(devices))),
        env={**rank_table_env(topology, options.framework_options), ERROR_FILE_VAR: error_file},
        cwd=str(base),
        log_file=str(log_dir / f"torchrun-node-{topology.node_rank}.log"),
        error_file=error_file,
    )
