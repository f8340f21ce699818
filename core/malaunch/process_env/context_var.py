"""The ``MALAUNCH_CONTEXT`` variable every process of a plan receives.

One compact JSON variable, read back by :mod:`malaunch.context`, instead of one variable per
value: ``MALAUNCH_<OPTION>`` names are the command-line options' environment twins (e.g.
``MALAUNCH_MASTER_ADDR``), so per-process values must stay out of that namespace, and a
single variable cannot be half-set.

The values are framework-neutral. Where a framework plugin already decided a value for the
process (its ``WORLD_SIZE``, ``RANK_SIZE`` or ``MS_WORKER_NUM``; its ``MASTER_*`` or
``MS_SCHED_*`` address), the context repeats the plugin's value, so the script and the
framework can never disagree.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.models import Device, ProcessSpec, Topology

CONTEXT_VAR = "MALAUNCH_CONTEXT"

# Roles that train (and so count in world_size) in a parameter-server cluster; ps and
# evaluator tasks serve or watch and have no rank among the trainers.
TRAINING_ROLES = ("chief", "master", "worker")
WORLD_SIZE_VARS = ("WORLD_SIZE", "RANK_SIZE", "MS_WORKER_NUM")
MASTER_VARS = (("MASTER_ADDR", "MASTER_PORT"), ("MS_SCHED_HOST", "MS_SCHED_PORT"))
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _int_or_none(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _world_size(topology: Topology, env: Mapping[str, str]) -> int:
    for name in WORLD_SIZE_VARS:
        value = _int_or_none(env.get(name))
        if value is not None:
            return value
    if topology.roles:
        trainers = sum(len(topology.roles.get(role, ())) for role in TRAINING_ROLES)
        if trainers:
            return trainers
    return topology.world_size


def _master(topology: Topology, env: Mapping[str, str]) -> Tuple[str, Optional[int]]:
    """The plugin's rendezvous variables, else the first trainer of a PS cluster (chief or
    worker 0, whose ``host:port`` is the cluster's own), else the topology's master."""
    for addr_var, port_var in MASTER_VARS:
        if env.get(addr_var):
            return env[addr_var], _int_or_none(env.get(port_var))
    for role in TRAINING_ROLES:
        addresses = topology.roles.get(role)
        if addresses:
            host, _, port = addresses[0].rpartition(":")
            return host.strip("[]"), _int_or_none(port)
    return topology.master_addr, topology.master_port


# The last topology's devices by rank: a plan asks once per process, and a scan per process
# would make a 10,000-process plan quadratic.
_by_rank: List[Tuple[Optional[Topology], Dict[int, Device]]] = [(None, {})]


def _device(topology: Topology, spec: ProcessSpec) -> Optional[Device]:
    """The device of this node that the process's rank owns, if the topology lists one."""
    if spec.rank is None:
        return None
    cached, devices = _by_rank[0]
    if cached is not topology:
        devices = {device.rank: device for device in topology.this_node.devices}
        _by_rank[0] = (topology, devices)
    return devices.get(spec.rank)


def agent(argv: Sequence[str]) -> Optional[str]:
    """``"torchrun"`` when the process is a torch elastic agent (``torchrun``, ``python -m
    torch.distributed.run``): its workers inherit this context but take their rank from the
    variables the agent sets for each of them, which :mod:`malaunch.context` then prefers."""
    if not argv:
        return None
    if os.path.basename(argv[0]) == "torchrun":
        return "torchrun"
    for position, arg in enumerate(argv[1:], start=1):
        if arg == "-m":
            following = argv[position + 1] if position + 1 < len(argv) else ""
            return "torchrun" if following in TORCHRUN_MODULES else None
        if not arg.startswith("-"):
            break
    return None


def context_dict(topology: Topology, spec: ProcessSpec, framework: str) -> Dict[str, Any]:
    """The context of one process as a JSON-ready dict (see ``docs/context.md``)."""
    device = _device(topology, spec)
    master_addr, master_port = _master(topology, spec.env)
    data = topology.data
    payload: Dict[str, Any] = {
        "rank": spec.rank,
        "local_rank": spec.local_rank,
        "world_size": _world_size(topology, spec.env),
        "node_rank": topology.node_rank,
        "nnodes": topology.nnodes,
        "role": spec.role,
        "device": device.local_index if device else None,
        "device_id": device.device_id if device else None,
        "master_addr": master_addr,
        "master_port": master_port,
        "job_id": topology.job_id or spec.env.get("JOB_ID"),
        "datasets": dict(data.dataset_map),
        "dataset": data.dataset,
        "cached_dataset": data.cached_dataset,
        "result_dir": data.result,
        "model_dir": data.model,
        "framework": framework,
        "source": topology.source,
        "agent": agent(spec.argv),
    }
    if payload["agent"]:
        # The agent's workers find their device by local rank: [in-container index, physical
        # id] of this node's devices in rank order, the order torchrun numbers local ranks.
        devices = topology.local_devices
        payload["local_devices"] = [[d.local_index, d.device_id] for d in devices]
    return payload


def context_env(topology: Topology, spec: ProcessSpec, framework: str = "") -> Dict[str, str]:
    """``{"MALAUNCH_CONTEXT": <compact JSON>}`` for one process of a plan.

    ASCII-only JSON (non-ASCII dataset names are ``\\u`` escaped), so the value survives any
    locale the child starts in.
    """
    payload = context_dict(topology, spec, framework)
    return {CONTEXT_VAR: json.dumps(payload, separators=(",", ":"), ensure_ascii=True)}
