"""The ``static-file`` topology source: the cluster written down in a JSON file.

``STATIC_TOPOLOGY_FILE`` names a file such as::

    {"hosts": ["192.0.2.11", "192.0.2.12"], "node_rank": 1, "nproc_per_node": 2,
     "master_port": 29500, "job_id": "demo"}

Like every source it reads only the ``env`` mapping it is given, never ``os.environ``, and
reports bad input with malaunch's exceptions, naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from malaunch.api import (
    MissingInputError,
    Node,
    ResolveOptions,
    Topology,
    TopologyError,
    check_world_size,
    device_slots,
)

NAME = "static-file"
VAR = "STATIC_TOPOLOGY_FILE"


def detect(env: Mapping[str, str]) -> bool:
    """Take part in ``--topology auto`` only when the variable is set."""
    return bool(env.get(VAR))


def _load(env: Mapping[str, str]) -> Dict[str, Any]:
    raw = env.get(VAR)
    if not raw:
        raise MissingInputError(f"{VAR} is not set: expected the path of a topology JSON file")
    path = Path(raw)
    if not path.is_file():
        raise MissingInputError(f"{VAR}={raw}: no such file")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TopologyError(f"{raw}: not valid JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise TopologyError(f"{raw}: expected a JSON object")
    return doc


def _int(doc: Mapping[str, Any], key: str, where: str, default: Optional[int] = None) -> int:
    value = doc.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TopologyError(f"{where}: {key}: expected a non-negative integer, got {value!r}")
    return value


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """The topology the file describes; ``--nproc-per-node`` wins over the file's value."""
    doc = _load(env)
    where = env[VAR]
    hosts = doc.get("hosts")
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        raise TopologyError(f"{where}: hosts: expected a non-empty list of host names")
    node_rank = _int(doc, "node_rank", where, 0)
    if node_rank >= len(hosts):
        raise TopologyError(f"{where}: node_rank: {node_rank} is not below {len(hosts)} hosts")
    nproc = options.nproc_per_node or _int(doc, "nproc_per_node", where, 1)
    # Before a single rank is built: a file may ask for more than any job runs.
    check_world_size(len(hosts), nproc, f"{where}: hosts ({len(hosts)}) x nproc_per_node={nproc}")
    nodes = tuple(
        Node(index=n, host=host, devices=device_slots(n * nproc, range(nproc)))
        for n, host in enumerate(hosts)
    )
    port = doc.get("master_port")
    return Topology(
        source=NAME,
        nodes=nodes,
        node_rank=node_rank,
        master_addr=hosts[0],
        master_port=None if port is None else _int(doc, "master_port", where),
        job_id=doc.get("job_id") if isinstance(doc.get("job_id"), str) else None,
    )
