"""The tensorflow_ps plan: this container's PS task, or a whole local cluster on loopback.

Pure functions of the topology, the command and the options, except that local mode asks
:func:`malaunch.api.free_port` for loopback ports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.api import (
    LaunchPlan,
    PlanOptions,
    ProcessSpec,
    Task,
    Topology,
    TopologyError,
    UsageError,
    free_port,
    path_safe,
)

FRAMEWORK = "tensorflow_ps"
LOOPBACK = "127.0.0.1"
DEFAULT_LOCAL_PS = 1
Cluster = Dict[str, Tuple[str, ...]]


def plan(topology: Topology, command: Sequence[str], options: PlanOptions) -> LaunchPlan:
    """This task's process, or with ``--num-ps``/``--num-workers`` the whole cluster here."""
    if not command:
        msg = "tensorflow_ps: no command given: malaunch --framework tensorflow_ps -- python x.py"
        raise UsageError(msg)
    base = Path(options.cwd)
    counts = local_counts(topology, options.framework_options)
    if counts is None:
        processes = [task_process(topology, command, options, base)]
    else:
        cluster = local_cluster(*counts)
        processes = local_processes(cluster, command, options, base)
        # The plan shows the cluster it made up, as a tf-ps source would have described it.
        topology = topology.model_copy(update={"roles": cluster})
    return LaunchPlan(framework=FRAMEWORK, topology=topology, processes=tuple(processes))


def _count(framework_options: Mapping[str, object], name: str) -> Optional[int]:
    value = framework_options[name]
    return None if value is None else int(str(value))


def local_counts(
    topology: Topology, framework_options: Mapping[str, object]
) -> Optional[Tuple[int, int]]:
    """(ps, workers) for local mode, or None when the topology names this container's task."""
    num_ps = _count(framework_options, "num_ps")
    num_workers = _count(framework_options, "num_workers")
    wanted = num_ps is not None or num_workers is not None
    if topology.roles and not wanted:
        return None
    if topology.roles:
        msg = (
            f"--num-ps/--num-workers plan a local cluster, but topology source "
            f"{topology.source!r} already describes one ({', '.join(topology.roles)})"
        )
        raise UsageError(msg)
    if not wanted:
        msg = (
            f"tensorflow_ps: topology source {topology.source!r} has no ps/worker roles; use "
            "--topology tf-ps or tf-config (TF_PS_HOSTS/TF_WORKER_HOSTS or TF_CONFIG), or "
            "--num-ps N --num-workers M to run the whole cluster on this machine"
        )
        raise UsageError(msg)
    if topology.nnodes > 1:
        msg = (
            f"--num-ps/--num-workers run the whole cluster on this machine, but topology "
            f"source {topology.source!r} has {topology.nnodes} nodes"
        )
        raise UsageError(msg)
    workers = num_workers if num_workers is not None else max(len(topology.this_node.devices), 1)
    return (num_ps if num_ps is not None else DEFAULT_LOCAL_PS), workers


def tf_config(cluster: Cluster, task: Task) -> str:
    """``TF_CONFIG`` as TF2 strategies read it."""
    body = {
        "cluster": {role: list(hosts) for role, hosts in cluster.items()},
        "task": {"type": task.role, "index": task.index},
    }
    return json.dumps(body, separators=(",", ":"))


def task_flags(cluster: Cluster, task: Task) -> List[str]:
    """The TF1 ``tf.train.ClusterSpec`` flags PS scripts conventionally parse."""
    return [
        f"--ps_hosts={','.join(cluster.get('ps', ()))}",
        f"--worker_hosts={','.join(cluster.get('worker', ()))}",
        f"--job_name={task.role}",
        f"--task_index={task.index}",
    ]


def task_rank(cluster: Cluster, task: Task) -> Optional[int]:
    """Workers are numbered chief first, then worker 0, 1, ...; ps/evaluator have no rank."""
    has_chief = 1 if cluster.get("chief") else 0
    if task.role == "chief":
        return 0
    if task.role == "worker":
        return has_chief + task.index
    return None


def _spec(
    cluster: Cluster,
    task: Task,
    command: Sequence[str],
    options: PlanOptions,
    *,
    base: Path,
    rank: Optional[int],
    local_rank: int,
    service: bool = False,
) -> ProcessSpec:
    flags = options.framework_options["tf_flags"] is not False
    argv = [*command, *task_flags(cluster, task)] if flags else list(command)
    return ProcessSpec(
        role=task.role,
        rank=rank,
        local_rank=local_rank,
        argv=tuple(argv),
        env={"TF_CONFIG": tf_config(cluster, task)},
        cwd=str(base),
        # A role comes from TF_CONFIG and may be any text: it names a file, not a path.
        log_file=str(base / options.log_dir / path_safe(f"{task.role}-{task.index}.log")),
        service=service,
    )


def task_process(
    topology: Topology, command: Sequence[str], options: PlanOptions, base: Path
) -> ProcessSpec:
    """The one task this container runs. A ps task is a service: it serves workers on other
    nodes, and the job's launchers stop it once every worker has succeeded."""
    task = topology.task
    if task is None:
        msg = (
            f"tensorflow_ps: topology source {topology.source!r} lists roles "
            f"({', '.join(topology.roles)}) but not this container's task (role and index)"
        )
        raise UsageError(msg)
    hosts = topology.roles.get(task.role, ())
    if not 0 <= task.index < len(hosts):
        msg = (
            f"tensorflow_ps: task {task.role} {task.index} is not in the cluster "
            f"({task.role}: {len(hosts)} hosts)"
        )
        raise TopologyError(msg)
    cluster = dict(topology.roles)
    # The source numbers training tasks (a device per chief/worker node); keep its numbering.
    devices = topology.this_node.devices
    rank = devices[0].rank if devices else task_rank(cluster, task)
    return _spec(
        cluster,
        task,
        command,
        options,
        base=base,
        rank=rank,
        local_rank=0,
        service=task.role == "ps",
    )


def local_cluster(num_ps: int, num_workers: int) -> Cluster:
    """Every task of a local cluster on its own free loopback port, ps first."""
    if num_workers < 1 or num_ps < 0:
        msg = f"--num-workers {num_workers} --num-ps {num_ps}: need >= 1 worker and >= 0 ps"
        raise UsageError(msg)
    ports: List[int] = []
    while len(ports) < num_ps + num_workers:
        port = free_port(LOOPBACK)
        if port not in ports:  # two look-ups may hand out the same free port
            ports.append(port)
    addresses = tuple(f"{LOOPBACK}:{port}" for port in ports)
    if not num_ps:
        return {"worker": addresses}
    return {"ps": addresses[:num_ps], "worker": addresses[num_ps:]}


def local_processes(
    cluster: Cluster, command: Sequence[str], options: PlanOptions, base: Path
) -> List[ProcessSpec]:
    """One process per task; ps are services, stopped once every worker has succeeded."""
    tasks = [Task(role=role, index=i) for role, hosts in cluster.items() for i in range(len(hosts))]
    # Workers' local ranks count workers only, so they stay 0..M-1 like their ranks.
    return [
        _spec(
            cluster,
            task,
            command,
            options,
            base=base,
            rank=task_rank(cluster, task),
            local_rank=task.index,
            service=task.role == "ps",
        )
        for task in tasks
    ]
