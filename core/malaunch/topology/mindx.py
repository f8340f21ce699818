"""MindX ascend-operator AscendJob pods, framework mindspore (platform conventions §2.2, §7.3).

The operator runs the MindSpore scheduler in its own pod (``MS_ROLE=MS_SCHED``, whose
``MS_SCHED_HOST`` is its own pod IP) and one worker pod per NPU group (``MS_ROLE=MS_WORKER``,
``MS_SCHED_HOST`` = the scheduler service IP, ``MS_NODE_RANK`` = pod rank, ``MS_LOCAL_WORKER``
= NPUs per pod, ``MS_WORKER_NUM`` = NPUs per pod x NPU pods, ``ASCEND_VISIBLE_DEVICES`` =
physical ids). The scheduler is external to the worker pods, so it appears in
``Topology.roles["scheduler"]``; on the scheduler pod itself ``Topology.task`` says so.
"""

from __future__ import annotations

from typing import List, Mapping, Set, Tuple

from malaunch.errors import TopologyError
from malaunch.models import Node, ResolveOptions, Task, Topology, device_slots
from malaunch.numbers import (
    MAX_LOCAL_PROCESSES,
    MAX_NODES,
    MAX_WORLD_SIZE,
    check_world_size,
    is_plain_int,
)
from malaunch.topology import envparse
from malaunch.wording import plural

SOURCE = "mindx"
SCHED_ROLE = "MS_SCHED"
WORKER_ROLE = "MS_WORKER"
ROLES = (SCHED_ROLE, WORKER_ROLE)
VISIBLE_VAR = "ASCEND_VISIBLE_DEVICES"
_DETECT_VARS = ("MS_ROLE", "MS_SCHED_HOST", "MS_WORKER_NUM")


def detect(env: Mapping[str, str]) -> bool:
    """``MS_ROLE``, ``MS_SCHED_HOST`` and ``MS_WORKER_NUM`` are set and no rank table is named."""
    if envparse.get(env, "RANK_TABLE_FILE") is not None:
        return False
    return all(envparse.get(env, name) is not None for name in _DETECT_VARS)


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """The worker pods as nodes; this pod's place among them, or the scheduler task."""
    role = _role(env)
    host = envparse.parse_host(_required(env, "MS_SCHED_HOST"), "MS_SCHED_HOST")
    port = envparse.read_port(env, "MS_SCHED_PORT")
    if port is None:
        msg = "MS_SCHED_PORT is not set: the ascend-operator sets the scheduler's port there"
        raise TopologyError(msg)
    total = _read_required_int(env, "MS_WORKER_NUM", minimum=1, maximum=MAX_WORLD_SIZE)
    if role == SCHED_ROLE:
        # The scheduler pod runs no worker; it only needs MS_WORKER_NUM right, so the worker
        # pods are modelled as well as its variables allow and this pod is node 0 by convention.
        local = envparse.read_int(env, "MS_LOCAL_WORKER", maximum=MAX_LOCAL_PROCESSES)
        local = local or _workers_per_pod(total)
        pods = _pod_count(total, local)
        node_rank, task = 0, Task(role="scheduler", index=0)
        nproc, ids = local, tuple(range(local))
    else:
        local = _read_required_int(env, "MS_LOCAL_WORKER", minimum=1, maximum=MAX_LOCAL_PROCESSES)
        pods = _pod_count(total, local)
        node_rank = _read_required_int(env, "MS_NODE_RANK")
        if node_rank >= pods:
            msg = (
                f"MS_NODE_RANK={node_rank} is out of range: MS_WORKER_NUM={total} / "
                f"MS_LOCAL_WORKER={local} gives {plural(pods, 'worker pod')}"
            )
            raise TopologyError(msg)
        task = Task(role="worker", index=node_rank)
        nproc = options.nproc_per_node or local
        check_world_size(pods, nproc, f"{plural(pods, 'worker pod')} x {plural(nproc, 'process')}")
        ids = _local_ids(env, nproc)
    nodes = tuple(
        Node(
            index=i,
            # Pods do not learn each other's addresses from the operator (only the scheduler's),
            # and MindSpore workers only ever dial the scheduler: a named placeholder is enough.
            host=f"mindx-worker-{i}",
            role="worker",
            # Other pods' physical ids are unknown here; their slots use in-container indices.
            devices=device_slots(i * nproc, ids if i == node_rank else tuple(range(nproc))),
        )
        for i in range(pods)
    )
    return Topology(
        source=SOURCE,
        nodes=nodes,
        node_rank=node_rank,
        master_addr=host,
        master_port=port,
        job_id=envparse.get(env, "MINDX_TASK_ID"),
        roles={"scheduler": (envparse.format_host_port(host, port),)},
        task=task,
        # Pods learn only the scheduler's address (the hosts above are placeholders), so the
        # node launchers cannot form a job channel; the operator's own policies stop the job.
        peers_reachable=False,
    )


def _role(env: Mapping[str, str]) -> str:
    role = _required(env, "MS_ROLE")
    if role not in ROLES:
        msg = (
            f'MS_ROLE="{role}": expected {" or ".join(ROLES)} (parameter servers are not supported)'
        )
        raise TopologyError(msg)
    return role


def _required(env: Mapping[str, str], name: str) -> str:
    value = envparse.get(env, name)
    if value is None:
        msg = f"{name} is not set: the ascend-operator sets it on every AscendJob pod"
        raise TopologyError(msg)
    return value


def _read_required_int(
    env: Mapping[str, str], name: str, *, minimum: int = 0, maximum: int = MAX_NODES
) -> int:
    value = envparse.read_int(env, name, minimum=minimum, maximum=maximum)
    if value is None:
        msg = f"{name} is not set: the ascend-operator sets it on every worker pod"
        raise TopologyError(msg)
    return value


def _pod_count(total: int, local: int) -> int:
    if total % local:
        msg = (
            f"MS_WORKER_NUM={total} is not a multiple of MS_LOCAL_WORKER={local}: "
            "expected NPUs per pod x worker pods"
        )
        raise TopologyError(msg)
    # Each pod is a node of the topology: 800,000 of them would take minutes to build.
    if total // local > MAX_NODES:
        msg = (
            f"MS_WORKER_NUM={total} / MS_LOCAL_WORKER={local} gives {total // local} worker "
            f"pods; at most {MAX_NODES}"
        )
        raise TopologyError(msg)
    return total // local


def _workers_per_pod(total: int) -> int:
    """NPUs per pod when the scheduler pod is not told: all workers in one pod, or, past what
    one pod may run, the largest count that divides them (the world size stays right)."""
    if total <= MAX_LOCAL_PROCESSES:
        return total
    return next(n for n in range(MAX_LOCAL_PROCESSES, 0, -1) if total % n == 0)


def _local_ids(env: Mapping[str, str], nproc: int) -> Tuple[int, ...]:
    """Physical ids from ``ASCEND_VISIBLE_DEVICES`` when it lists one per process.

    Inside the container the NPUs appear as logical 0..n-1 whatever their physical ids, so a
    count mismatch (e.g. ``--nproc-per-node`` below the pod's NPUs) falls back to indices.
    """
    raw = envparse.get(env, VISIBLE_VAR)
    if raw is None:
        return tuple(range(nproc))
    ids: List[int] = []
    seen: Set[int] = set()
    for number, item in enumerate(raw.split(","), start=1):
        if not is_plain_int(item.strip()):
            msg = f'{VISIBLE_VAR}="{raw}": item {number} "{item}" is not a device id'
            raise TopologyError(msg)
        if int(item) in seen:  # two processes would share one NPU
            msg = f'{VISIBLE_VAR}="{raw}": item {number} "{item}" lists a device id twice'
            raise TopologyError(msg)
        seen.add(int(item))
        ids.append(int(item))
    return tuple(sorted(ids)) if len(ids) == nproc else tuple(range(nproc))
