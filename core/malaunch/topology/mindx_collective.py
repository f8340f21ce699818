"""MindX ascend-operator AscendJob pods, frameworks pytorch and tensorflow (conventions §7.3).

The operator gives both frameworks the same facts under different names, on every NPU pod:

==================  ======================  ===================
fact                pytorch                 tensorflow
==================  ======================  ===================
master address      ``MASTER_ADDR``         ``CM_CHIEF_IP``
master port         ``MASTER_PORT``         ``CM_CHIEF_PORT``
this pod's rank     ``RANK``                ``CM_RANK``
NPUs x NPU pods     ``WORLD_SIZE``          ``CM_WORKER_SIZE``
NPUs per pod        ``LOCAL_WORLD_SIZE``    ``CM_LOCAL_WORKER``
==================  ======================  ===================

plus ``MINDX_TASK_ID`` (the job's UID), ``ASCEND_VISIBLE_DEVICES`` (this pod's physical NPUs),
for pytorch ``LOCAL_RANK`` = ``0,1,...,n-1`` (a list) and for tensorflow ``CM_WORKER_IP`` (this
pod's IP). The master pod has rank 0 and worker ``i`` rank ``i + 1``.

The traps: ``RANK`` is a *pod* rank while ``WORLD_SIZE`` counts *processes*, and ``LOCAL_RANK``
is a list; none of them reaches a process unchanged. Nodes are ``WORLD_SIZE /
LOCAL_WORLD_SIZE`` pods of ``LOCAL_WORLD_SIZE`` ranks (``--nproc-per-node`` overrides the
count of this pod's processes), and this pod is node ``RANK``. A pod learns only the master's
address (the master Service's IP; a tensorflow chief its own pod IP), so the other nodes get
placeholder names. The job channel needs only node 0's: the other nodes dial the master
through its Service, which forwards only the ports the ``ascend`` container declares, so the
job port (master port + 1) must be one of them (``malaunch render ascendjob`` declares it).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Optional, Tuple

from malaunch.errors import TopologyError
from malaunch.models import Node, ResolveOptions, Topology, device_slots
from malaunch.numbers import MAX_LOCAL_PROCESSES, MAX_NODES, MAX_WORLD_SIZE, check_world_size
from malaunch.topology import envparse
from malaunch.topology.data import parse_data_paths
from malaunch.wording import plural

TASK_ID_VAR = "MINDX_TASK_ID"
VISIBLE_VAR = "ASCEND_VISIBLE_DEVICES"
# A device plugin annotation item: a plain id, or "<chip>-<id>" (Ascend910-3).
_DEVICE_ITEM = re.compile(r"(?:[A-Za-z0-9]+-)?(?P<id>[0-9]{1,5})")


@dataclasses.dataclass(frozen=True)
class Names:
    """Where one framework's AscendJob pods carry each fact."""

    source: str
    master: str
    port: str
    rank: str
    total: str
    local: str
    own_address: Optional[str] = None


PYTORCH = Names(
    "mindx-pytorch", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
)  # fmt: skip
TENSORFLOW = Names(
    "mindx-tensorflow", "CM_CHIEF_IP", "CM_CHIEF_PORT", "CM_RANK",
    "CM_WORKER_SIZE", "CM_LOCAL_WORKER", own_address="CM_WORKER_IP",
)  # fmt: skip


def _has_all(env: Mapping[str, str], names: Names) -> bool:
    wanted = (names.master, names.rank, names.total, names.local)
    return all(envparse.get(env, name) is not None for name in wanted)


def detect_pytorch(env: Mapping[str, str]) -> bool:
    """``MINDX_TASK_ID``, ``MASTER_ADDR``, ``RANK``, ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE``."""
    return envparse.get(env, TASK_ID_VAR) is not None and _has_all(env, PYTORCH)


def detect_tensorflow(env: Mapping[str, str]) -> bool:
    """``CM_CHIEF_IP``, ``CM_RANK``, ``CM_WORKER_SIZE`` and ``CM_LOCAL_WORKER``."""
    return _has_all(env, TENSORFLOW)


def resolve_pytorch(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """An AscendJob pod of framework pytorch."""
    return resolve(PYTORCH, env, options)


def resolve_tensorflow(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """An AscendJob pod of framework tensorflow."""
    return resolve(TENSORFLOW, env, options)


def _unset(name: str) -> TopologyError:
    return TopologyError(
        f"{name} is not set: the ascend-operator sets it on every NPU pod of an AscendJob"
    )


def _required(env: Mapping[str, str], name: str, minimum: int, maximum: int) -> int:
    value = envparse.read_int(env, name, minimum=minimum, maximum=maximum)
    if value is None:
        raise _unset(name)
    return value


def _shape(names: Names, env: Mapping[str, str]) -> Tuple[int, int, int]:
    """(NPU pods, NPUs per pod, this pod's rank)."""
    total = _required(env, names.total, 1, MAX_WORLD_SIZE)
    local = _required(env, names.local, 1, MAX_LOCAL_PROCESSES)
    if total % local:
        msg = (
            f"{names.total}={total} is not a multiple of {names.local}={local}: "
            "expected NPUs per pod x NPU pods"
        )
        raise TopologyError(msg)
    pods = total // local
    if pods > MAX_NODES:  # each pod is a node of the topology: a million would take minutes
        msg = (
            f"{names.total}={total} / {names.local}={local} gives {pods} NPU pods; "
            f"at most {MAX_NODES}"
        )
        raise TopologyError(msg)
    rank = _required(env, names.rank, 0, MAX_NODES)
    if rank >= pods:
        msg = (
            f"{names.rank}={rank} is out of range: {names.total}={total} / "
            f"{names.local}={local} gives {plural(pods, 'NPU pod')}"
        )
        raise TopologyError(msg)
    return pods, local, rank


def resolve(names: Names, env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """The NPU pods as nodes, ``nproc`` ranks each, node-major; this pod is its rank."""
    pods, local, rank = _shape(names, env)
    master = envparse.get(env, names.master)
    if master is None:
        raise _unset(names.master)
    master = envparse.parse_host(master, names.master)
    nproc = options.nproc_per_node or local
    check_world_size(pods, nproc, f"{plural(pods, 'NPU pod')} x {plural(nproc, 'process')}")
    ids = physical_ids(env, nproc)
    own = _own_address(env, names)
    nodes = tuple(
        Node(
            index=i,
            # Pods learn only the master's address (node 0): the others are named placeholders.
            host=master if i == 0 else (own if i == rank and own else f"mindx-node-{i}"),
            role="master" if i == 0 else "worker",
            # Other pods' physical ids are unknown here; their slots use in-container indices.
            devices=device_slots(i * nproc, ids if i == rank else tuple(range(nproc))),
        )
        for i in range(pods)
    )
    return Topology(
        source=names.source,
        nodes=nodes,
        node_rank=rank,
        master_addr=master,
        master_port=envparse.read_port(env, names.port),
        job_id=envparse.get(env, TASK_ID_VAR),
        data=parse_data_paths(env),
        # Node 0 is the master, whose address every pod has: the job channel needs no other.
        peers_reachable=True,
    )


def _own_address(env: Mapping[str, str], names: Names) -> Optional[str]:
    if names.own_address is None or envparse.get(env, names.own_address) is None:
        return None
    return envparse.parse_host(env[names.own_address].strip(), names.own_address)


def physical_ids(env: Mapping[str, str], nproc: int) -> Tuple[int, ...]:
    """This pod's physical NPU ids from ``ASCEND_VISIBLE_DEVICES`` when it lists one per
    process (``0,1`` or the device plugin's ``Ascend910-0,Ascend910-1``).

    Inside the container the NPUs are logical 0..n-1 whatever their physical ids, and the ids
    only label devices, so a list of another length or form falls back to the indices.
    """
    raw = envparse.get(env, VISIBLE_VAR)
    matches = [_DEVICE_ITEM.fullmatch(item.strip()) for item in (raw or "").split(",")]
    ids = [int(match["id"]) for match in matches if match]
    if raw is None or len(ids) != len(matches) or len(ids) != nproc or len(set(ids)) != nproc:
        return tuple(range(nproc))
    return tuple(sorted(ids))
