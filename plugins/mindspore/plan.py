"""The mindspore plan: rank-table mode or dynamic-cluster (msrun-style) mode.

Pure functions of the topology, the command and the options: nothing is started, created or
exported here. The only look-ups are the launcher's working directory and whether a relative
script path names an existing file (see :mod:`malaunch_mindspore.command`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

from malaunch.api import (
    Device,
    LaunchPlan,
    PlanOptions,
    ProcessSpec,
    Target,
    Topology,
    UsageError,
    path_safe,
)
from malaunch_mindspore.command import anchor_command, prepend_path

FRAMEWORK = "mindspore"
MODES = ("auto", "ranktable", "dynamic")
DEFAULT_SCHED_PORT = 8118  # msrun's default
DEFAULT_TOPO_TIMEOUT = 600  # msrun --cluster_time_out default, seconds
HCCL_CONNECT_TIMEOUT = "1800"  # what ModelArts' bootstrap sets when unset


def plan(topology: Topology, command: Sequence[str], options: PlanOptions) -> LaunchPlan:
    """Plan this node's processes; the mode comes from ``--ms-mode`` (default ``auto``)."""
    if not command:
        msg = "mindspore: no command given: malaunch --framework mindspore -- python train.py"
        raise UsageError(msg)
    base = Path(options.cwd)
    mode = choose_mode(topology, options.framework_options["ms_mode"])
    if mode == "ranktable":
        processes = rank_table_processes(topology, command, options, base)
    else:
        processes = dynamic_processes(topology, command, options, base)
    return LaunchPlan(framework=FRAMEWORK, topology=topology, processes=tuple(processes))


def choose_mode(topology: Topology, mode: str) -> str:
    """``auto`` picks rank-table mode exactly when the topology carries a rank table."""
    if mode not in MODES:
        msg = f"--ms-mode {mode!r}: expected one of {', '.join(MODES)}"
        raise UsageError(msg)
    if mode == "auto":
        return "ranktable" if topology.rank_table_file else "dynamic"
    if mode == "ranktable" and not topology.rank_table_file:
        msg = (
            f"--ms-mode ranktable: topology source {topology.source!r} gives no rank table "
            "(use --topology ranktable, or --ms-mode dynamic)"
        )
        raise UsageError(msg)
    return mode


def local_devices(topology: Topology) -> List[Device]:
    """This node's devices in rank order (one process each)."""
    devices = list(topology.local_devices)
    if not devices:
        msg = (
            f"mindspore: topology source {topology.source!r} lists no devices on node "
            f"{topology.node_rank} ({topology.this_node.host})"
        )
        raise UsageError(msg)
    return devices


def job_id(topology: Topology, environ: Mapping[str, str]) -> str:
    """``JOB_ID`` if set, else the topology's job id (the source read the platform's, e.g.
    ModelArts' ``MA_VJ_NAME``), else a stable generated id.

    The generated id is a hash of what every node sees alike (source, hosts, master), so all
    nodes of one job agree on it and a plan is reproducible.
    """
    if environ.get("JOB_ID"):
        return environ["JOB_ID"]
    if topology.job_id:
        return topology.job_id
    seed = "|".join(
        [topology.source, topology.master_addr, str(topology.master_port)]
        + [node.host for node in topology.nodes]
    )
    return "malaunch-" + hashlib.sha1(seed.encode()).hexdigest()[:12]


def workspace(environ: Mapping[str, str], log_dir: Path, base: Path) -> Path:
    """Parent of the ``device<i>`` working directories."""
    mount = environ.get("MA_MOUNT_PATH")
    if mount:
        return base / mount / "workspace"  # an absolute mount path replaces base
    return log_dir / "workspace"


def rank_table_processes(
    topology: Topology, command: Sequence[str], options: PlanOptions, base: Path
) -> List[ProcessSpec]:
    """One process per local device, each in its own ``device<i>`` directory."""
    assert topology.rank_table_file is not None  # choose_mode() checked it
    environ = options.environ
    devices = local_devices(topology)
    log_dir = base / options.log_dir
    job = job_id(topology, environ)
    argv, target = anchor_command(command, base)
    common: Dict[str, str] = {
        "RANK_TABLE_FILE": topology.rank_table_file,
        "RANK_SIZE": str(topology.world_size),
        "RANK_START": str(devices[0].rank),
    }
    if "JOB_ID" not in environ:
        common["JOB_ID"] = job
    if "HCCL_CONNECT_TIMEOUT" not in environ:
        common["HCCL_CONNECT_TIMEOUT"] = HCCL_CONNECT_TIMEOUT
    if target is Target.MODULE:
        # ``python -m pkg`` finds pkg through sys.path[0], which is the device directory.
        common["PYTHONPATH"] = prepend_path(str(base), environ.get("PYTHONPATH", ""))
    parent = workspace(environ, log_dir, base)
    processes = []
    for local_rank, device in enumerate(devices):
        env = dict(common)
        env["RANK_ID"] = str(device.rank)
        env["DEVICE_ID"] = env["ASCEND_DEVICE_ID"] = str(device.local_index)
        dirs: Tuple[str, ...] = ()
        if "ASCEND_PROCESS_LOG_PATH" not in environ:
            path = log_dir / path_safe(job) / "ascend" / "process_log" / f"rank_{device.rank}"
            env["ASCEND_PROCESS_LOG_PATH"] = str(path)
            dirs = (str(path),)  # SPEC §5: created, as the ModelArts bootstrap does
        name = f"{path_safe(job)}-proc-rank-{device.rank}-device-{device.local_index}.txt"
        processes.append(
            ProcessSpec(
                role="worker",
                rank=device.rank,
                local_rank=local_rank,
                argv=tuple(argv),
                env=env,
                cwd=str(parent / f"device{device.local_index}"),
                log_file=str(log_dir / name),
                dirs=dirs,
            )
        )
    return processes


def sched_port(topology: Topology, framework_options: Mapping[str, object]) -> int:
    """``--ms-sched-port``, else the topology's master port, else msrun's 8118."""
    chosen = framework_options["ms_sched_port"]
    if chosen is not None:
        return int(str(chosen))
    return topology.master_port or DEFAULT_SCHED_PORT


def dynamic_processes(
    topology: Topology, command: Sequence[str], options: PlanOptions, base: Path
) -> List[ProcessSpec]:
    """A scheduler on node 0 plus one worker per local device, as msrun starts them.

    A topology naming an external scheduler (``roles["scheduler"]``, MindX ascend-operator)
    gets workers only; on the scheduler's own pod (``task.role == "scheduler"``) only the
    scheduler is planned.
    """
    log_dir = base / options.log_dir
    timeout = options.framework_options["ms_topo_timeout"]
    # Every process, the scheduler included, must see the same MS_SCHED_* and MS_WORKER_NUM.
    common = {
        "MS_SCHED_HOST": topology.master_addr,
        "MS_SCHED_PORT": str(sched_port(topology, options.framework_options)),
        "MS_WORKER_NUM": str(topology.world_size),
        "MS_TOPO_TIMEOUT": str(timeout),
        "RANK_SIZE": str(topology.world_size),
    }
    argv = tuple(command)
    scheduler = ProcessSpec(
        role="scheduler",
        argv=argv,
        env={**common, "MS_ROLE": "MS_SCHED"},
        cwd=str(base),
        log_file=str(log_dir / "scheduler.log"),
        # The scheduler ends by itself once every worker of the cluster has unregistered.
        # Alone on one node it can be stopped with the local workers; across nodes, stopping
        # it when node 0's workers are done would strand the other nodes' workers, so there
        # it is waited for like a worker. On its own pod it is the job.
        service=topology.nnodes == 1 and not _is_scheduler_task(topology),
    )
    if _is_scheduler_task(topology):
        return [scheduler]
    devices = local_devices(topology)
    processes = []
    if topology.node_rank == 0 and "scheduler" not in topology.roles:
        processes.append(scheduler)
    for local_rank, device in enumerate(devices):
        env = {
            **common,
            "MS_ROLE": "MS_WORKER",
            "MS_NODE_ID": str(device.rank),
            "DEVICE_ID": str(device.local_index),
        }
        processes.append(
            ProcessSpec(
                role="worker",
                rank=device.rank,
                local_rank=local_rank,
                argv=argv,
                env=env,
                cwd=str(base),
                log_file=str(log_dir / f"worker-{device.rank}.log"),
            )
        )
    return processes


def _is_scheduler_task(topology: Topology) -> bool:
    return topology.task is not None and topology.task.role == "scheduler"
