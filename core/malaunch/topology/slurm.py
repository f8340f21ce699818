"""Slurm: the (step) node list, this node's ``SLURM_NODEID``, processes per node.

malaunch is one launcher per node that starts the node's processes itself, so the start
command inside an allocation is ``srun --ntasks-per-node=1 malaunch ...``. ``SLURM_PROCID``
and ``SLURM_LOCALID`` are per *task*, so they are never used as ranks; a ``SLURM_LOCALID``
above 0 means a second launcher runs on this node and would start every rank twice, which is
an error.

Hosts come from ``SLURM_STEP_NODELIST`` (inside ``srun``), else ``SLURM_JOB_NODELIST`` /
``SLURM_NODELIST``; ``SLURM_NODEID`` indexes that list. The list's length is checked against
the matching count (``SLURM_STEP_NUM_NODES`` for the step list, ``SLURM_JOB_NUM_NODES`` and
``SLURM_NNODES`` for the job list: a step may use fewer nodes than the job). Processes per
node: ``--nproc-per-node``, else ``SLURM_GPUS_ON_NODE`` when above 0, else this node's entry
of ``SLURM_STEP_TASKS_PER_NODE`` / ``SLURM_TASKS_PER_NODE`` (per node, so nodes may differ),
else ``SLURM_NTASKS_PER_NODE``, else 1. The master is the first host; its port is left to the
framework.
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Tuple

from malaunch.errors import TopologyError
from malaunch.models import Node, ResolveOptions, Topology, device_slots
from malaunch.numbers import MAX_LOCAL_PROCESSES, check_world_size
from malaunch.topology import envparse
from malaunch.topology.data import parse_data_paths
from malaunch.topology.slurm_hostlist import expand_counts, expand_hostlist
from malaunch.wording import plural

SOURCE = "slurm"
NODELIST_VARS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
# Which node counts describe which list.
COUNT_VARS = {
    "SLURM_STEP_NODELIST": ("SLURM_STEP_NUM_NODES",),
    "SLURM_JOB_NODELIST": ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
    "SLURM_NODELIST": ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
}
TASKS_VARS = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
ONE_PER_NODE = "srun --ntasks-per-node=1 malaunch ..."


def detect(env: Mapping[str, str]) -> bool:
    """A node list and ``SLURM_NODEID`` are set (so this runs inside a Slurm allocation)."""
    has_list = any(envparse.get(env, name) is not None for name in NODELIST_VARS)
    return has_list and envparse.get(env, "SLURM_NODEID") is not None


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """All nodes of the step, node-major ranks; this node is ``SLURM_NODEID``."""
    _check_one_launcher(env)
    label, hosts = _hosts(env)
    for name in COUNT_VARS[label]:
        envparse.check_host_count(env, name, label, len(hosts))
    node_rank = envparse.node_index(env, "SLURM_NODEID", label, len(hosts))
    counts, origin = _nprocs(env, options, len(hosts), node_rank)
    check_world_size(1, sum(counts), f"{label} ({plural(len(hosts), 'node')}) with {origin}")
    ids = envparse.device_ids(env, counts[node_rank], origin)
    nodes: List[Node] = []
    first_rank = 0
    for index, host in enumerate(hosts):
        # Other nodes' physical ids are unknown here; their slots use local indices.
        own = ids if index == node_rank else tuple(range(counts[index]))
        nodes.append(Node(index=index, host=host, devices=device_slots(first_rank, own)))
        first_rank += counts[index]
    return Topology(
        source=SOURCE,
        nodes=tuple(nodes),
        node_rank=node_rank,
        master_addr=hosts[0],
        master_port=None,
        job_id=envparse.job_id(env) or envparse.get(env, "SLURM_JOB_ID"),
        data=parse_data_paths(env),
    )


def _check_one_launcher(env: Mapping[str, str]) -> None:
    local_id = envparse.read_int(env, "SLURM_LOCALID", maximum=MAX_LOCAL_PROCESSES)
    if local_id is not None and local_id > 0:
        msg = (
            f"SLURM_LOCALID={local_id}: malaunch must run once per node and starts the node's "
            f"processes itself; start it with `{ONE_PER_NODE}`"
        )
        raise TopologyError(msg)


def _hosts(env: Mapping[str, str]) -> Tuple[str, List[str]]:
    """(the variable the list came from, the expanded hosts)."""
    for name in NODELIST_VARS:
        value = envparse.get(env, name)
        if value is not None:
            hosts = expand_hostlist(value, name)
            # Node names become addresses peers dial and text in logs: hold them to what a
            # host name is, so "$(id)" or a control character never gets that far.
            for host in hosts:
                envparse.check_host(host, f'{name}="{value}"')
            return name, hosts
    msg = f"none of {', '.join(NODELIST_VARS)} is set: cannot tell the job's nodes"
    raise TopologyError(msg)


def _nprocs(
    env: Mapping[str, str], options: ResolveOptions, nnodes: int, node_rank: int
) -> Tuple[List[int], str]:
    """(processes of every node, where this node's count came from)."""
    if options.nproc_per_node is not None:
        return [options.nproc_per_node] * nnodes, "--nproc-per-node"
    gpus = envparse.read_int(env, "SLURM_GPUS_ON_NODE", maximum=MAX_LOCAL_PROCESSES)
    if gpus is not None and gpus > 0:
        # Only this node's count is known: the other nodes are assumed alike.
        return [gpus] * nnodes, "SLURM_GPUS_ON_NODE"
    per_node = _tasks_per_node(env, nnodes)
    if per_node is not None:
        return per_node
    tasks = envparse.read_int(env, "SLURM_NTASKS_PER_NODE", minimum=1, maximum=MAX_LOCAL_PROCESSES)
    if tasks is not None:
        return [tasks] * nnodes, "SLURM_NTASKS_PER_NODE"
    return [1] * nnodes, "the default of 1 process per node"


def _tasks_per_node(env: Mapping[str, str], nnodes: int) -> Optional[Tuple[List[int], str]]:
    for name in TASKS_VARS:
        value = envparse.get(env, name)
        if value is None:
            continue
        counts = expand_counts(value, name)
        if len(counts) != nnodes:
            msg = (
                f'{name}="{value}" gives {plural(len(counts), "node")}, the node list has {nnodes}'
            )
            raise TopologyError(msg)
        if 0 in counts:
            msg = f'{name}="{value}": every node needs at least 1 task'
            raise TopologyError(msg)
        return counts, name
    return None
