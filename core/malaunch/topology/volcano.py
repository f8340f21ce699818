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
from malaunch.files import TooLarge, read_regular
from malaunch.models import Node, ResolveOptions, Topology, device_slots
from malaunch.numbers import MAX_LOCAL_PROCESSES, MAX_NODES, check_world_size
from malaunch.topology import envparse
from malaunch.topology.data import parse_data_paths
from malaunch.wording import plural

SOURCE = "volcano"
ETC_VOLCANO = Path("/etc/volcano")
DIR_VAR = "MALAUNCH_VOLCANO_DIR"
HOSTS_VAR = "VC_WORKER_HOSTS"
HOST_FILES = ("worker.host", "VC_WORKER_HOSTS")
# 100,000 hosts of 253 characters and a separator: anything larger is no host file.
MAX_HOST_FILE_BYTES = 32 << 20


def volcano_dir(env: Mapping[str, str]) -> Path:
    """Where the svc plugin's ConfigMap is mounted."""
    return Path(envparse.get(env, DIR_VAR) or ETC_VOLCANO)


def _host_file(env: Mapping[str, str]) -> Optional[Path]:
    for name in HOST_FILES:
        path = volcano_dir(env) / name
        # exists(), not is_file(): a FIFO there is refused by the reader, not called missing.
        if path.exists() and not path.is_dir():
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
    hosts_count = plural(len(hosts), "host")
    check_world_size(len(hosts), nproc, f"{label} ({hosts_count}) x {origin}={nproc}")
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
    return str(path), read_host_file(path)


def read_host_file(path: Path) -> List[str]:
    """The hosts of a mounted host file: ``<task>.host`` one a line, ``VC_<TASK>_HOSTS`` a
    comma list.

    Only a regular file of at most :data:`MAX_HOST_FILE_BYTES` is read, without blocking (a
    FIFO would hang the launcher, ``/dev/zero`` never end), and the hosts are counted against
    :data:`MAX_NODES` before any is parsed.

    :raises MissingInputError: the file cannot be read, or is a FIFO, device or directory (66).
    :raises TopologyError: too large, not UTF-8, empty, too many hosts, or a bad host (65).
    """
    try:
        text = read_regular(path, MAX_HOST_FILE_BYTES).decode("utf-8")
    except TooLarge as exc:
        msg = f"{path}: {exc.strerror} (no host file of {MAX_NODES} hosts is that large)"
        raise TopologyError(msg) from exc
    except OSError as exc:
        msg = f"cannot read {path}: {exc.strerror or exc}"
        raise MissingInputError(msg) from exc
    except UnicodeDecodeError as exc:
        msg = f"{path}: not UTF-8 text (byte {exc.start})"
        raise TopologyError(msg) from exc
    text = text.strip()
    comma_list = path.suffix != ".host"
    count = text.count(",") + 1 if comma_list else text.count("\n") + 1
    if count > MAX_NODES:
        msg = f"{path}: lists {count} hosts; at most {MAX_NODES} nodes in one job"
        raise TopologyError(msg)
    if comma_list:
        return envparse.parse_hosts(text, str(path))
    if not text:
        msg = f"{path} is empty: expected one host per line"
        raise TopologyError(msg)
    return [
        envparse.parse_host(line.strip(), f'{path} line {number} "{line}"')
        for number, line in enumerate(text.splitlines(), start=1)
    ]


def _pod_name(host: str) -> Optional[str]:
    """``<pod>.<job>`` DNS names (Volcano's svc plugin) start with the pod name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.split(".", 1)[0] if "." in host else None
    return None
