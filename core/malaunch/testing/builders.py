"""Topology builders for plugin tests (part of the ``malaunch.testing`` kit).

Addresses are documentation ranges (RFC 5737): hosts 192.0.2.0/24, NPU IPs 198.51.100.0/24.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from malaunch.models import Device, Node, Task, Topology, device_slots


def _hosts(count: int) -> List[str]:
    return ["127.0.0.1"] if count == 1 else [f"192.0.2.{11 + i}" for i in range(count)]


def make_topology(
    nodes: int = 2,
    nproc_per_node: int = 2,
    node_rank: int = 0,
    source: str = "local",
    **overrides: Any,
) -> Topology:
    """A homogeneous cluster: ``nodes`` x ``nproc_per_node`` ranks numbered node by node.

    One node is ``127.0.0.1``; several are ``192.0.2.11``, ``192.0.2.12``, ...; the master is
    the first node and ``master_port`` is unset (pass ``master_port=...`` to set it). Any
    other :class:`~malaunch.models.Topology` field can be given in ``overrides``.
    """
    hosts = _hosts(nodes)
    built = [
        Node(
            index=n,
            host=host,
            devices=device_slots(n * nproc_per_node, range(nproc_per_node)),
        )
        for n, host in enumerate(hosts)
    ]
    fields: Dict[str, Any] = {
        "source": source,
        "nodes": tuple(built),
        "node_rank": node_rank,
        "master_addr": hosts[0],
    }
    fields.update(overrides)
    return Topology(**fields)


def make_rank_table_topology(
    servers: int = 2,
    devices_per_server: int = 8,
    node_rank: int = 0,
    rank_table_file: str = "/home/ma-user/rank_table/jobstart_hccl.json",
    device_ids: Optional[Sequence[int]] = None,
    **overrides: Any,
) -> Topology:
    """What the ``ranktable`` source gives for a template-1 table.

    ``device_ids`` are the physical ids of each server in table order (default
    ``0..devices_per_server-1``); ranks are numbered server by server in that order, and each
    device's ``local_index`` is its position in the server's *ascending* id list.
    """
    ids = list(device_ids) if device_ids is not None else list(range(devices_per_server))
    ascending = sorted(ids)
    nodes = []
    for s in range(servers):
        devices = tuple(
            Device(
                rank=s * len(ids) + i,
                local_index=ascending.index(device_id),
                device_id=device_id,
                device_ip=f"198.51.100.{s * len(ids) + i + 1}",
            )
            for i, device_id in enumerate(ids)
        )
        nodes.append(Node(index=s, host=f"192.0.2.{11 + s}", devices=devices))
    fields: Dict[str, Any] = {
        "source": "ranktable",
        "nodes": tuple(nodes),
        "node_rank": node_rank,
        "master_addr": nodes[0].host,
        "rank_table_file": rank_table_file,
    }
    fields.update(overrides)
    return Topology(**fields)


def make_ps_topology(
    num_ps: int = 2,
    num_workers: int = 3,
    *,
    role: str = "worker",
    index: int = 0,
    num_chief: int = 0,
    port: int = 2222,
    job: str = "job-tf",
    **overrides: Any,
) -> Topology:
    """A parameter-server cluster as the ``tf-ps``/``tf-config`` sources describe it.

    One node per task (chief, ps, worker order) on ``<job>-<role>-<i>.<job>:<port>``;
    chief and worker nodes hold one rank each (chiefs first), ps nodes none; the task this
    container runs is ``role`` ``index``.
    """
    counts = {"chief": num_chief, "ps": num_ps, "worker": num_workers}
    roles = {
        name: tuple(f"{job}-{name}-{i}.{job}:{port}" for i in range(count))
        for name, count in counts.items()
        if count
    }
    nodes: List[Node] = []
    node_rank = None
    for name, addresses in roles.items():
        for i, address in enumerate(addresses):
            if (name, i) == (role, index):
                node_rank = len(nodes)
            devices: Tuple[Device, ...] = ()
            if name in ("chief", "worker"):
                rank = i + (num_chief if name == "worker" else 0)
                devices = (Device(rank=rank, local_index=0, device_id=0),)
            host = address.rsplit(":", 1)[0]
            pod = host.split(".", 1)[0]
            nodes.append(Node(index=len(nodes), host=host, name=pod, role=name, devices=devices))
    if node_rank is None:
        msg = f"make_ps_topology: task {role} {index} is not in {counts}"
        raise ValueError(msg)
    master = roles["chief"][0] if num_chief else roles["worker"][0]
    fields: Dict[str, Any] = {
        "source": "tf-ps",
        "nodes": tuple(nodes),
        "node_rank": node_rank,
        "master_addr": master.rsplit(":", 1)[0],
        "job_id": job,
        "roles": roles,
        "task": Task(role=role, index=index),
    }
    fields.update(overrides)
    return Topology(**fields)
