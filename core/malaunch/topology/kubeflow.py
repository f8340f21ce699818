"""Kubeflow PyTorchJob pods: training-operator v1 and Trainer v2 (platform conventions §7.2).

training-operator v1, with a Master replica: ``MASTER_ADDR`` = ``PET_MASTER_ADDR`` =
``<job>-master-0``, ``MASTER_PORT`` = ``PET_MASTER_PORT`` (container port ``pytorchjob-port``,
default 23456), ``PET_NNODES`` = replicas, ``PET_NODE_RANK`` = ``RANK`` = replica index (+1 for
workers), ``PET_NPROC_PER_NODE`` = ``spec.nprocPerNode`` (a number, or ``auto``/``gpu``/``cpu``).
Trainer v2 (TrainJob on a JobSet): ``PET_NNODES``, ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``,
``PET_MASTER_ADDR`` = ``<trainjob>-trainer-node-0-0.<trainjob>``, ``PET_MASTER_PORT``.

The trap: ``RANK`` is a *node* rank while ``WORLD_SIZE`` counts *processes* (replicas x
nprocPerNode) in current releases, and pods in older ones that set no ``PET_NNODES``. So the
nodes are ``PET_NNODES`` (else, for those older operators, ``WORLD_SIZE``, unless
``LOCAL_WORLD_SIZE`` or ``LOCAL_RANK`` shows it counts processes: refused), this node
``PET_NODE_RANK`` (else ``RANK``), and processes per node ``--nproc-per-node``, else a numeric
``PET_NPROC_PER_NODE``, else one per visible device, else 1. Neither is passed on to processes.

Peers: the operator gives every pod a headless Service, so the master's name tells the others'
(v1 ``<job>-master-0`` -> ``<job>-worker-<i>``; v2 ``<prefix>-0-0.<domain>`` ->
``<prefix>-0-<i>.<domain>``), checked against this pod's ``HOSTNAME``. A master address of
another form tells nothing about the others: they get placeholder names (the job channel only
needs the master's, node 0's, address).

Elastic PyTorchJobs (``elasticPolicy``: ``PET_RDZV_*``, ``PET_NNODES=min:max``) are refused:
malaunch starts a fixed set of nodes with fixed node ranks.
"""

from __future__ import annotations

import re
from typing import List, Mapping, Optional, Tuple

from malaunch.errors import TopologyError
from malaunch.models import Node, ResolveOptions, Topology, device_slots
from malaunch.numbers import MAX_LOCAL_PROCESSES, MAX_NODES, check_world_size, is_plain_int
from malaunch.topology import envparse
from malaunch.topology.data import parse_data_paths

SOURCE = "kubeflow"
DETECT_VARS = ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_RDZV_ENDPOINT")
ELASTIC_VARS = ("PET_RDZV_ENDPOINT", "PET_RDZV_BACKEND", "PET_RDZV_ID", "PET_RDZV_CONF")
# Set where WORLD_SIZE counts processes (MindX pods, launchers' workers), never by a PyTorchJob.
PROCESS_COUNT_MARKERS = ("LOCAL_WORLD_SIZE", "LOCAL_RANK")
SHOWN_VALUE = 40  # characters of a marker's value a message keeps (a LOCAL_RANK list is long)
NPROC_WORDS = ("auto", "gpu", "cpu")  # torchrun's --nproc-per-node words: devices decide
LOOPBACK = "127.0.0.1"
_V1_MASTER = re.compile(r"(?P<job>.+)-master-0(?P<domain>\..+)?")
_V2_MASTER = re.compile(r"(?P<prefix>.+)-0-0(?P<domain>\..+)?")


def detect(env: Mapping[str, str]) -> bool:
    """``PET_NNODES``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR`` or ``PET_RDZV_ENDPOINT`` is set."""
    return any(envparse.get(env, name) is not None for name in DETECT_VARS)


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """The job's nodes, ``nproc`` ranks each, node-major; this pod is ``PET_NODE_RANK``."""
    _refuse_elastic(env)
    nnodes = _nnodes(env)
    node_rank = _node_rank(env, nnodes)
    master = _master(env, nnodes)
    nproc, origin = _nproc(env, options)
    ids = envparse.device_ids(env, nproc, origin)
    per_node = len(ids)
    check_world_size(nnodes, per_node, f"{_nnodes_name(env)}={nnodes} x {origin}={per_node}")
    hosts = peer_hosts(master, nnodes, node_rank, envparse.get(env, "HOSTNAME"))
    nodes = tuple(
        Node(
            index=i,
            host=hosts[i] if hosts else (master if i == 0 else f"kubeflow-node-{i}"),
            name=hosts[i].split(".", 1)[0] if hosts else None,
            # Other pods' physical ids are unknown here; their slots use in-container indices.
            devices=device_slots(i * per_node, ids if i == node_rank else tuple(range(per_node))),
        )
        for i in range(nnodes)
    )
    return Topology(
        source=SOURCE,
        nodes=nodes,
        node_rank=node_rank,
        master_addr=master,
        master_port=_port(env),
        job_id=envparse.job_id(env) or _job_name(master),
        data=parse_data_paths(env),
        # nodes[0] is the master, which every pod dials, placeholder peers or not.
        peers_reachable=True,
    )


def _refuse_elastic(env: Mapping[str, str]) -> None:
    found = [(name, env[name]) for name in ELASTIC_VARS if envparse.get(env, name) is not None]
    nnodes = envparse.get(env, "PET_NNODES")
    if nnodes is not None and ":" in nnodes:
        found.insert(0, ("PET_NNODES", env["PET_NNODES"]))
    if found:
        name, value = found[0]
        msg = (
            f'{name}="{value}": elastic PyTorchJobs (elasticPolicy, torchrun rendezvous) are not '
            "supported; malaunch starts a fixed number of nodes with fixed node ranks: remove "
            "elasticPolicy and give the job a Master replica"
        )
        raise TopologyError(msg)


def _nnodes(env: Mapping[str, str]) -> int:
    """``PET_NNODES``; operators that set none counted pods in ``WORLD_SIZE``."""
    nnodes = envparse.read_int(env, "PET_NNODES", minimum=1, maximum=MAX_NODES)
    if nnodes is not None:
        return nnodes
    if envparse.get(env, "WORLD_SIZE") is not None:
        _refuse_process_world_size(env)
    nnodes = envparse.read_int(env, "WORLD_SIZE", minimum=1, maximum=MAX_NODES)
    if nnodes is not None:
        return nnodes
    msg = "PET_NNODES is not set (nor WORLD_SIZE): cannot tell how many nodes the PyTorchJob has"
    raise TopologyError(msg)


def _refuse_process_world_size(env: Mapping[str, str]) -> None:
    """No pod count in ``WORLD_SIZE`` where ``LOCAL_WORLD_SIZE`` or ``LOCAL_RANK`` is set.

    No PyTorchJob sets either; MindX AscendJob pods (``LOCAL_RANK`` a list) and launchers' workers
    do, and their ``WORLD_SIZE`` counts processes: read as nodes, 16 NPUs of 2 pods would be
    16 nodes.
    """
    for name in PROCESS_COUNT_MARKERS:
        value = envparse.get(env, name)
        if value is not None:
            msg = (
                f"PET_NNODES is not set, and WORLD_SIZE={_clip(env['WORLD_SIZE'])} cannot count "
                f"the PyTorchJob's nodes where {name}={_clip(value)} is set (it counts processes "
                "then): set PET_NNODES, or read a MindX AscendJob pod with --topology mindx-pytorch"
            )
            raise TopologyError(msg)


def _clip(value: str) -> str:
    value = value.strip()
    return value if len(value) <= SHOWN_VALUE else value[:SHOWN_VALUE] + "..."


def is_v1_master(host: str) -> bool:
    """``host`` is a training-operator v1 master's Service name, ``<job>-master-0[.<domain>]``."""
    return _V1_MASTER.fullmatch(host.strip()) is not None


def _nnodes_name(env: Mapping[str, str]) -> str:
    """The variable :func:`_nnodes` read, for messages."""
    return "PET_NNODES" if envparse.get(env, "PET_NNODES") else "WORLD_SIZE"


def _node_rank(env: Mapping[str, str], nnodes: int) -> int:
    label = _nnodes_name(env)
    pet = envparse.read_int(env, "PET_NODE_RANK", maximum=MAX_NODES)
    plain = envparse.read_int(env, "RANK", maximum=MAX_NODES)
    if pet is not None and plain is not None and pet != plain:
        msg = (
            f"PET_NODE_RANK={pet} and RANK={plain} disagree: the training operator sets both "
            "to this pod's node rank"
        )
        raise TopologyError(msg)
    name, rank = ("PET_NODE_RANK", pet) if pet is not None else ("RANK", plain)
    if rank is None:
        if nnodes == 1:
            return 0
        msg = (
            f"PET_NODE_RANK is not set (nor RANK) and {label}={nnodes}: cannot tell which node "
            "this is (a PyTorchJob sets it when it has a Master replica)"
        )
        raise TopologyError(msg)
    if rank >= nnodes:
        msg = f"{name}={rank} is out of range for {label}={nnodes}"
        raise TopologyError(msg)
    return rank


def _master(env: Mapping[str, str], nnodes: int) -> str:
    for name in ("PET_MASTER_ADDR", "MASTER_ADDR"):
        value = envparse.get(env, name)
        if value is not None:
            return envparse.parse_host(value, name)
    if nnodes == 1:
        return LOOPBACK
    msg = (
        "PET_MASTER_ADDR is not set (nor MASTER_ADDR): the operator sets it when the PyTorchJob "
        "has a Master replica"
    )
    raise TopologyError(msg)


def _port(env: Mapping[str, str]) -> Optional[int]:
    pet = envparse.read_port(env, "PET_MASTER_PORT")
    return pet if pet is not None else envparse.read_port(env, "MASTER_PORT")


def _nproc(env: Mapping[str, str], options: ResolveOptions) -> Tuple[Optional[int], str]:
    """(processes per node or None for one per visible device, where it came from)."""
    if options.nproc_per_node is not None:
        return options.nproc_per_node, "--nproc-per-node"
    value = envparse.get(env, "PET_NPROC_PER_NODE")
    if value is None or value.lower() in NPROC_WORDS:
        return None, "PET_NPROC_PER_NODE"
    if not is_plain_int(value):
        msg = (
            f'PET_NPROC_PER_NODE="{env["PET_NPROC_PER_NODE"]}": expected a number of processes, '
            f"or {', '.join(NPROC_WORDS)}"
        )
        raise TopologyError(msg)
    nproc = envparse.read_int(env, "PET_NPROC_PER_NODE", minimum=1, maximum=MAX_LOCAL_PROCESSES)
    return nproc, "PET_NPROC_PER_NODE"


def peer_hosts(
    master: str, nnodes: int, node_rank: int, hostname: Optional[str]
) -> Optional[List[str]]:
    """Every node's address from the master's Service name, or None when it does not tell.

    ``hostname`` (this pod's ``HOSTNAME``) must be this node's name when given: a master
    address set by hand could follow the pattern by chance.
    """
    v1 = _V1_MASTER.fullmatch(master)
    v2 = _V2_MASTER.fullmatch(master)
    if v1:
        domain = v1["domain"] or ""
        hosts = [master] + [f"{v1['job']}-worker-{i}{domain}" for i in range(nnodes - 1)]
    elif v2:
        hosts = [f"{v2['prefix']}-0-{i}{v2['domain'] or ''}" for i in range(nnodes)]
    else:
        return None
    if hostname is not None and hostname.split(".", 1)[0] != hosts[node_rank].split(".", 1)[0]:
        return None
    return hosts


def _job_name(master: str) -> Optional[str]:
    v1 = _V1_MASTER.fullmatch(master)
    if v1:
        return v1["job"]
    v2 = _V2_MASTER.fullmatch(master)
    return v2["domain"][1:].split(".", 1)[0] if v2 and v2["domain"] else None
