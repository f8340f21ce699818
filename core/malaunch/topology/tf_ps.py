"""TensorFlow parameter-server variables: ``TF_PS_HOSTS``, ``TF_WORKER_HOSTS``.

A launch-script convention (ModelArts TF PS jobs, benchmark scripts), not something Volcano or
ModelArts inject: comma-separated ``host:port`` lists, maybe wrapped in ``[...]`` or quoted,
``TF_CHIEF_HOSTS`` optionally. The task comes from ``MA_TASK_NAME`` (= the Volcano task name)
and ``VC_TASK_INDEX`` (the index *within* that task: ps-1 and worker-1 both see 1).

:func:`build_topology` is shared with the ``TF_CONFIG`` source: both describe the same cluster.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Tuple

from malaunch.errors import TopologyError
from malaunch.models import Device, Node, ResolveOptions, Task, Topology
from malaunch.numbers import MAX_NODES
from malaunch.topology import envparse
from malaunch.topology.data import parse_data_paths
from malaunch.wording import plural

SOURCE = "tf-ps"
# Node order; ranks are numbered in the same order, so node index and rank grow together.
ROLE_ORDER = ("chief", "ps", "worker", "evaluator")
# Roles whose tasks train and so get a rank; ps and evaluator tasks do not.
TRAINING_ROLES = ("chief", "worker")
HOST_VARS = {"chief": "TF_CHIEF_HOSTS", "ps": "TF_PS_HOSTS", "worker": "TF_WORKER_HOSTS"}
REQUIRED_VARS = ("TF_PS_HOSTS", "TF_WORKER_HOSTS")

# role -> task index -> (host, port). A mapping rather than a list because the sparse
# TF_CONFIG form lists only some indices of a role.
RoleMap = Dict[str, Dict[int, Tuple[str, int]]]


def detect(env: Mapping[str, str]) -> bool:
    """Both ``TF_PS_HOSTS`` and ``TF_WORKER_HOSTS`` are set."""
    return all(envparse.get(env, name) is not None for name in REQUIRED_VARS)


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """The PS cluster of the ``TF_*_HOSTS`` lists, seen from this task."""
    del options  # one process per task: nothing to choose
    for name in REQUIRED_VARS:
        if envparse.get(env, name) is None:
            msg = f"{name} is not set (the {SOURCE} source needs TF_PS_HOSTS and TF_WORKER_HOSTS)"
            raise TopologyError(msg)
    roles: RoleMap = {}
    for role, name in HOST_VARS.items():
        if envparse.get(env, name) is not None:
            roles[role] = dict(enumerate(envparse.parse_host_ports(env[name], name)))
    check_distinct(roles, lambda role, index: f"{HOST_VARS[role]} item {index + 1}")
    role = _task_role(env, roles)
    index = _task_index(env, role, len(roles[role]))
    return build_topology(SOURCE, roles, Task(role=role, index=index), env)


def _task_role(env: Mapping[str, str], roles: RoleMap) -> str:
    known = ", ".join(role for role in ROLE_ORDER if role in roles)
    role = envparse.get(env, "MA_TASK_NAME")
    if role is None:
        msg = f"MA_TASK_NAME is not set: expected the task this container runs ({known})"
        raise TopologyError(msg)
    if role not in roles:
        msg = f'MA_TASK_NAME="{env["MA_TASK_NAME"]}": expected one of {known}'
        raise TopologyError(msg)
    return role


def _task_index(env: Mapping[str, str], role: str, count: int) -> int:
    name = HOST_VARS[role]
    index = envparse.read_int(env, "VC_TASK_INDEX", maximum=MAX_NODES)
    if index is None:
        if count == 1:
            return 0
        msg = (
            f"VC_TASK_INDEX is not set and {name} lists {plural(count, role + ' task')}: "
            "cannot tell which one this container runs"
        )
        raise TopologyError(msg)
    if index >= count:
        msg = f"VC_TASK_INDEX={index} is out of range for {name} ({plural(count, 'task')})"
        raise TopologyError(msg)
    return index


def ordered_roles(roles: RoleMap) -> List[str]:
    """Known roles in :data:`ROLE_ORDER`, then any other role name alphabetically."""
    known = [role for role in ROLE_ORDER if role in roles]
    return known + sorted(role for role in roles if role not in ROLE_ORDER)


def build_topology(
    source: str,
    roles: RoleMap,
    task: Task,
    env: Mapping[str, str],
    unlisted_host: Optional[str] = None,
) -> Topology:
    """One node per task (roles in :data:`ROLE_ORDER`), one rank per chief/worker task.

    Chief tasks get ranks 0..c-1 and worker ``i`` gets rank ``c + i``, so without a chief the
    rank is the worker index and the world size is the number of workers. ``unlisted_host``
    is the address of this task when the cluster does not list it (an evaluator in old
    TF_CONFIG layouts); it then becomes an extra node without a rank. The caller has checked
    the addresses with :func:`check_distinct`, naming where it read them.
    """
    chiefs = len(roles.get("chief", {}))
    nodes: List[Node] = []
    node_rank: Optional[int] = None
    for role in ordered_roles(roles):
        for index in sorted(roles[role]):
            if (role, index) == (task.role, task.index):
                node_rank = len(nodes)
            devices: Tuple[Device, ...] = ()
            if role in TRAINING_ROLES:
                rank = index + (chiefs if role == "worker" else 0)
                devices = (Device(rank=rank, local_index=0, device_id=0),)
            host = roles[role][index][0]
            # <job>-<role>-<index>.<domain> hosts (Volcano, Kubeflow) start with the pod name.
            name = host.split(".", 1)[0] if envparse.job_name_from_host(host, role, index) else None
            nodes.append(Node(index=len(nodes), host=host, name=name, role=role, devices=devices))
    if node_rank is None:
        if unlisted_host is None:
            msg = f"{source}: task {task.role} {task.index} is not in the cluster"
            raise TopologyError(msg)
        node_rank = len(nodes)
        nodes.append(Node(index=node_rank, host=unlisted_host, role=task.role))
    return Topology(
        source=source,
        nodes=tuple(nodes),
        node_rank=node_rank,
        master_addr=_master(roles, nodes),
        job_id=envparse.job_id(env) or _job_name(roles),
        roles={
            role: tuple(envparse.format_host_port(*roles[role][i]) for i in sorted(roles[role]))
            for role in ordered_roles(roles)
        },
        task=task,
        data=parse_data_paths(env),
    )


def check_distinct(roles: RoleMap, where: Callable[[str, int], str], prefix: str = "") -> None:
    """TensorFlow binds one server per task: two tasks on one host:port cannot both run.

    ``where(role, index)`` names what lists a task (``TF_WORKER_HOSTS item 2``,
    ``cluster.worker[1]``) and ``prefix`` starts the message (``TF_CONFIG: ``).
    """
    seen: Dict[Tuple[str, int], Tuple[str, int]] = {}
    for role in ordered_roles(roles):
        for index, (host, port) in sorted(roles[role].items()):
            address = (host.lower(), port)  # host names are case-blind
            if address in seen:
                shown = envparse.format_host_port(host, port)
                first, second = where(*seen[address]), where(role, index)
                msg = f"{prefix}{first} and {second} are both at {shown}"
                raise TopologyError(msg)
            seen[address] = (role, index)


def _master(roles: RoleMap, nodes: List[Node]) -> str:
    """The chief, else the lowest-index worker, else the first node."""
    for role in TRAINING_ROLES:
        if roles.get(role):
            return roles[role][min(roles[role])][0]
    return nodes[0].host


def _job_name(roles: RoleMap) -> Optional[str]:
    """The job name in ``<job>-<role>-<index>.<domain>`` hosts (Volcano, Kubeflow), if any."""
    for role in ordered_roles(roles):
        for index, (host, _port) in sorted(roles[role].items()):
            return envparse.job_name_from_host(host, role, index)
    return None
