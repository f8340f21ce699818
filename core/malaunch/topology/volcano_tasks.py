"""Volcano Jobs of several tasks, e.g. the pytorch plugin's master + worker (conventions §6, §10).

Volcano's svc plugin gives every pod each task's hosts: ``VC_<TASK>_HOSTS`` (comma list) and
``VC_<TASK>_NUM``, or, with ``--inject-hosts-env=false``, the files ``<task>.host`` (one host a
line) and ``VC_<TASK>_HOSTS`` in ``/etc/volcano``; ``<TASK>`` is the task name upper-cased with
``-`` turned into ``_``. The env plugin's ``VC_TASK_INDEX`` counts *within* a task (ps-0 and
worker-0 are both 0), so it is not a node rank.

Every pod of every task is a node, in this **task order**: the task whose first pod
``MASTER_ADDR`` names (the pytorch plugin's ``--master`` task), then ``master``, ``chief``,
``worker``, then the other tasks by name; pods by index within a task. The node rank is this
pod's position in that order, which is also the pytorch plugin's ``RANK`` for master + worker.
This pod is known by its pod name (``MA_CURRENT_INSTANCE_NAME``, else ``HOSTNAME``, which the
svc plugin makes ``<job>-<task>-<index>``): the host whose first label it is, else the one task
it ends in; ``VC_TASK_INDEX``, when set, must agree. ``MA_TASK_NAME`` is the last resort.

The master is ``MASTER_ADDR`` / ``MASTER_PORT`` when the pytorch plugin sets them (so they must
name a task's first pod), else node 0 without a port. Processes per node: ``--nproc-per-node``,
else ``MA_NUM_GPUS``, else 1. The plugin's ``RANK`` / ``WORLD_SIZE`` count pods: not read.

A job whose only task is ``worker`` is the ``volcano`` source's; this one takes the others.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from malaunch.errors import MissingInputError, TopologyError
from malaunch.models import Node, ResolveOptions, Topology, device_slots
from malaunch.numbers import MAX_LOCAL_PROCESSES, MAX_NODES, check_world_size
from malaunch.topology import envparse
from malaunch.topology.data import parse_data_paths
from malaunch.topology.volcano import read_host_file, volcano_dir
from malaunch.wording import plural

SOURCE = "volcano-tasks"
HOSTS_VAR = re.compile(r"VC_(?P<task>[A-Z0-9_]+)_HOSTS")
PRIORITY = {"MASTER": 1, "CHIEF": 2, "WORKER": 3}  # 0: the task MASTER_ADDR names; 4: others
IN_JOB_VARS = ("VC_TASK_INDEX", "VK_TASK_INDEX")

Tasks = Dict[str, List[str]]  # task key (VC_<KEY>_HOSTS) -> hosts in pod index order


@dataclasses.dataclass(frozen=True)
class Pod:
    """This pod: its task key, index within the task, and job name (when its name tells)."""

    task: str
    index: int
    job: Optional[str]


def task_key(name: str) -> str:
    """A task name as Volcano spells it in variable names: upper case, ``-`` -> ``_``."""
    return name.upper().replace("-", "_")


def _env_tasks(env: Mapping[str, str]) -> Dict[str, str]:
    """Task key -> variable name, for every non-blank ``VC_<TASK>_HOSTS``."""
    found = {}
    for name in sorted(env):
        match = HOSTS_VAR.fullmatch(name)
        if match and envparse.get(env, name) is not None:
            found[match["task"]] = name
    return found


def _file_tasks(env: Mapping[str, str]) -> Dict[str, Path]:
    """Task key -> host file in the mounted svc ConfigMap (``<task>.host`` preferred)."""
    if not any(name in env for name in IN_JOB_VARS):
        return {}  # a stale /etc/volcano in an image is no job
    directory = volcano_dir(env)
    if not directory.is_dir():
        return {}
    found: Dict[str, Path] = {}
    # Not is_file(): a FIFO or device there is refused by read_host_file, not overlooked.
    for path in sorted(directory.iterdir()):
        match = HOSTS_VAR.fullmatch(path.name)
        if match and not path.is_dir():
            found.setdefault(match["task"], path)
    for path in sorted(directory.glob("*.host")):
        if not path.is_dir():
            found[task_key(path.stem)] = path
    return found


def detect(env: Mapping[str, str]) -> bool:
    """Some task other than ``worker`` has hosts (variables, else the mounted files)."""
    keys = set(_env_tasks(env)) or set(_file_tasks(env))
    return bool(keys - {"WORKER"})


def read_tasks(env: Mapping[str, str]) -> Tuple[Tasks, Dict[str, str]]:
    """(hosts per task, where each list came from), from the variables, else the files."""
    tasks: Tasks = {}
    labels: Dict[str, str] = {}
    for key, name in _env_tasks(env).items():
        tasks[key], labels[key] = envparse.parse_hosts(env[name], name), name
    if not tasks:
        for key, path in _file_tasks(env).items():
            tasks[key], labels[key] = read_host_file(path), str(path)
    if not tasks:
        msg = (
            f"no VC_<TASK>_HOSTS variable is set and {volcano_dir(env)} holds no host file: "
            "is the Volcano job's svc plugin on?"
        )
        raise MissingInputError(msg)
    for key, hosts in tasks.items():
        envparse.check_host_count(env, f"VC_{key}_NUM", labels[key], len(hosts))
    return tasks, labels


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _label(host: str) -> str:
    """The first DNS label (a pod name for ``<pod>.<job>`` hosts); an address as it is."""
    return host if _is_ip(host) else host.split(".", 1)[0].lower()


def _find_host(tasks: Tasks, host: str) -> Optional[Tuple[str, int]]:
    wanted = _label(host)
    for key, hosts in tasks.items():
        for index, candidate in enumerate(hosts):
            if candidate.lower() == host.lower() or _label(candidate) == wanted:
                return key, index
    return None


def _master_task(env: Mapping[str, str], tasks: Tasks, labels: Dict[str, str]) -> Optional[str]:
    """The task whose first pod ``MASTER_ADDR`` names, if it is set."""
    master = envparse.get(env, "MASTER_ADDR")
    if master is None:
        return None
    found = _find_host(tasks, master)
    if found is None:
        listed = ", ".join(labels[key] for key in tasks)
        msg = (
            f"MASTER_ADDR=\"{master}\" is none of the job's pods ({listed}): Volcano's pytorch "
            "plugin sets the first pod of its master task there"
        )
        raise TopologyError(msg)
    key, index = found
    if index != 0:
        msg = (
            f'MASTER_ADDR="{master}" is pod {index} of task {key.lower()}: '
            "expected the first pod of a task"
        )
        raise TopologyError(msg)
    return key


def task_order(tasks: Tasks, master_task: Optional[str]) -> List[str]:
    """The documented order: MASTER_ADDR's task, master, chief, worker, then by name."""
    return sorted(tasks, key=lambda k: (0 if k == master_task else PRIORITY.get(k, 4), k))


def _pod_name(env: Mapping[str, str]) -> Tuple[Optional[str], str]:
    for name in ("MA_CURRENT_INSTANCE_NAME", "HOSTNAME"):
        value = envparse.get(env, name)
        if value is not None:
            return value, name
    return None, "HOSTNAME"


def _by_name(pod: str, var: str, tasks: Tasks) -> Optional[Pod]:
    """``<job>-<task>-<index>``: the host labelled so, else the one task the name ends in."""
    found = _find_host(tasks, pod)
    head, _, index = pod.split(".", 1)[0].rpartition("-")
    if found is not None:
        key, at = found
        job = head[: -len(key) - 1] if task_key(head).endswith("_" + key) else None
        return Pod(key, at, job or None)
    if not (index.isascii() and index.isdigit()):
        return None
    keys = [k for k in tasks if task_key(head).endswith("_" + k) and len(head) > len(k) + 1]
    if len(keys) > 1:
        names = ", ".join(k.lower() for k in keys)
        msg = f'{var}="{pod}" ends in more than one task name ({names}): cannot tell its task'
        raise TopologyError(msg)
    if not keys:
        return None
    return Pod(keys[0], int(index), head[: -len(keys[0]) - 1])


def this_pod(env: Mapping[str, str], tasks: Tasks, labels: Dict[str, str]) -> Pod:
    """Which task and index this pod is; ``VC_TASK_INDEX`` must agree."""
    pod_name, var = _pod_name(env)
    pod = _by_name(pod_name, var, tasks) if pod_name else None
    index = envparse.read_int(env, "VC_TASK_INDEX", maximum=MAX_NODES)
    if pod is None and envparse.get(env, "MA_TASK_NAME") is not None:
        key = task_key(env["MA_TASK_NAME"].strip())
        if key in tasks and (index is not None or len(tasks[key]) == 1):
            pod, var = Pod(key, index or 0, None), "MA_TASK_NAME"
    if pod is None:
        names = ", ".join(k.lower() for k in tasks)
        shown = f'{var}="{pod_name}" is' if pod_name else f"{var} is not set, so it is"
        msg = (
            f"{shown} not <job>-<task>-<index> for a task of this job ({names}): "
            "cannot tell which pod this is"
        )
        raise TopologyError(msg)
    if index is not None and index != pod.index:
        msg = f"VC_TASK_INDEX={index} disagrees with {var}: {pod.task.lower()} pod {pod.index}"
        raise TopologyError(msg)
    count = len(tasks[pod.task])
    if pod.index >= count:
        msg = (
            f"{var}: {pod.task.lower()} pod {pod.index} is out of range for "
            f"{labels[pod.task]} ({plural(count, 'host')})"
        )
        raise TopologyError(msg)
    return pod


def _nproc(env: Mapping[str, str], options: ResolveOptions) -> Tuple[int, str]:
    if options.nproc_per_node is not None:
        return options.nproc_per_node, "--nproc-per-node"
    gpus = envparse.read_int(env, "MA_NUM_GPUS", maximum=MAX_LOCAL_PROCESSES)
    return gpus or 1, "MA_NUM_GPUS"


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """Every pod of every task in task order, ``nproc`` ranks each; this pod by its name."""
    tasks, labels = read_tasks(env)
    master_task = _master_task(env, tasks, labels)
    order = task_order(tasks, master_task)
    pod = this_pod(env, tasks, labels)
    nproc, origin = _nproc(env, options)
    ids = envparse.device_ids(env, nproc, origin)
    pods = sum(len(hosts) for hosts in tasks.values())
    listed = " + ".join(labels.values())
    check_world_size(pods, nproc, f"{listed} ({plural(pods, 'host')}) x {origin}={nproc}")
    placed = [(key, i, host) for key in order for i, host in enumerate(tasks[key])]
    node_rank = next(n for n, (key, i, _) in enumerate(placed) if (key, i) == (pod.task, pod.index))
    nodes = tuple(
        Node(
            index=n,
            host=host,
            name=None if _is_ip(host) else host.split(".", 1)[0],
            role=key.lower(),
            # Other pods' physical ids are unknown here; their slots use in-container indices.
            devices=device_slots(n * nproc, ids if n == node_rank else tuple(range(nproc))),
        )
        for n, (key, _, host) in enumerate(placed)
    )
    return Topology(
        source=SOURCE,
        nodes=nodes,
        node_rank=node_rank,
        master_addr=envparse.get(env, "MASTER_ADDR") or nodes[0].host,
        master_port=envparse.read_port(env, "MASTER_PORT"),
        job_id=envparse.job_id(env) or pod.job,
        data=parse_data_paths(env),
    )
