"""Volcano / ModelArts / Octopus variables: one worker task, one process group per pod.

Hosts come from ``VC_WORKER_HOSTS`` (Volcano's svc plugin, comma list), or, when the platform
does not inject it, from the ConfigMap it mounts at ``/etc/volcano``: ``worker.host``
(newline-separated, no trailing newline) or ``VC_WORKER_HOSTS``. ``VC_TASK_INDEX`` is this
pod's node rank, ``MA_NUM_HOSTS`` / ``VC_WORKER_NUM`` are cross-checked with the host count,
``MA_NUM_GPUS`` gives the processes per node, ``VC_WORKER_PORT`` the master port. The master is
the first host.

Platform ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` are deliberately never read: Volcano's and
Kubeflow's count pods, and MindX's ``LOCAL_RANK`` is a list.

``MALAUNCH_VOLCANO_DIR`` replaces ``/etc/volcano`` (tests and ``malaunch simulate``).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

from malaunch.errors import MissingInputError, TopologyError
from malaunch.models import Node, ResolveOptions, Topology, device_slots
from malaunch.numbers import MAX_LOCAL_PROCESSES, check_world_size
from malaunch.topology import envparse
from malaunch.topology.data import parse_data_paths

SOURCE = "volcano"
ETC_VOLCANO = Path("/etc/volcano")
DIR_VAR = "MALAUNCH_VOLCANO_DIR"
HOSTS_VAR = "VC_WORKER_HOSTS"
HOST_FILES = ("worker.host", "VC_WORKER_HOSTS")


def volcano_dir(env: Mapping[str, str]) -> Path:
    """Where the svc plugin's ConfigMap is mounted."""
    return Path(envparse.get(env, DIR_VAR) or ETC_VOLCANO)


def _host_file(env: Mapping[str, str]) -> Optional[Path]:
    for name in HOST_FILES:
        path = volcano_dir(env) / name
        if path.is_file():
            return path
    return None


def detect(env: Mapping[str, str]) -> bool:
    """``VC_WORKER_HOSTS`` is set, or the mounted host file exists next to Volcano variables.

    The file alone is not enough: an image may carry a stale ``/etc/volcano`` from elsewhere.
    """
    if envparse.get(env, HOSTS_VAR) is not None:
        return True
    in_job = "VC_TASK_INDEX" in env or "MA_NUM_HOSTS" in env
    return in_job and _host_file(env) is not None


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """All worker pods, ``nproc`` ranks each, node-major; this pod is ``VC_TASK_INDEX``."""
    label, hosts = _hosts(env)
    envparse.check_host_count(env, "MA_NUM_HOSTS", label, len(hosts))
    envparse.check_host_count(env, "VC_WORKER_NUM", label, len(hosts))
    node_rank = envparse.node_index(env, "VC_TASK_INDEX", label, len(hosts))
    if options.nproc_per_node is not None:
        nproc, origin = options.nproc_per_node, "--nproc-per-node"
    else:
        gpus = envparse.read_int(env, "MA_NUM_GPUS", maximum=MAX_LOCAL_PROCESSES)
        nproc, origin = gpus or 1, "MA_NUM_GPUS"
    check_world_size(len(hosts), nproc, f"{label} ({len(hosts)} hosts) x {origin}={nproc}")
    ids = envparse.device_ids(env, nproc, origin)
    nodes = [
        Node(
            index=i,
            host=host,
            name=_pod_name(host),
            # Other pods' physical ids are unknown here; their slots use in-container indices.
            devices=device_slots(i * nproc, ids if i == node_rank else tuple(range(nproc))),
        )
        for i, host in enumerate(hosts)
    ]
    task = envparse.get(env, "MA_TASK_NAME") or "worker"
    return Topology(
        source=SOURCE,
        nodes=tuple(nodes),
        node_rank=node_rank,
        master_addr=hosts[0],
        master_port=envparse.read_port(env, "VC_WORKER_PORT"),
        job_id=envparse.job_id(env) or envparse.job_name_from_host(hosts[0], task, 0),
        data=parse_data_paths(env),
    )


def _hosts(env: Mapping[str, str]) -> Tuple[str, List[str]]:
    """(where the list came from, the hosts)."""
    if envparse.get(env, HOSTS_VAR) is not None:
        return HOSTS_VAR, envparse.parse_hosts(env[HOSTS_VAR], HOSTS_VAR)
    path = _host_file(env)
    if path is None:
        where = volcano_dir(env)
        msg = (
            f"{HOSTS_VAR} is not set and neither {where}/worker.host nor {where}/{HOSTS_VAR} exists"
        )
        raise MissingInputError(msg)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot read {path}: {exc}"
        raise MissingInputError(msg) from exc
    if path.name == HOSTS_VAR:
        return str(path), envparse.parse_hosts(text.strip(), str(path))
    lines = text.strip().splitlines()
    if not lines:
        msg = f"{path} is empty: expected one host per line"
        raise TopologyError(msg)
    hosts = [
        envparse.parse_host(line.strip(), f'{path} line {number} "{line}"')
        for number, line in enumerate(lines, start=1)
    ]
    return str(path), hosts


def _pod_name(host: str) -> Optional[str]:
    """``<pod>.<job>`` DNS names (Volcano's svc plugin) start with the pod name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.split(".", 1)[0] if "." in host else None
    return None
