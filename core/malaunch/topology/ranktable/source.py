"""The ``ranktable`` topology source: HCCL rank tables (SPEC §4, platform-conventions §1, §10).

Where the table is: ``RANK_TABLE_FILE_V_1_0`` (a template-1 file), else ``RANK_TABLE_FILE`` (a
file, or a directory holding ``jobstart_hccl.json`` or ``hccl.json``), else ModelArts'
``/user/config/jobstart_hccl.json``. The table is waited for (see
:mod:`malaunch.topology.ranktable.read`), then validated; a template-2 table is converted and
written as template 1, which is the file the processes receive (a template-2 file named by
``RANK_TABLE_FILE_V_1_0`` is converted too, rather than refused). The Topology has one node per
server entry (template 2: per pod, even when pods share a node), in rank order.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Dict, Mapping

from malaunch.errors import MissingInputError, NotReadyError, TopologyError
from malaunch.files import output_path
from malaunch.models import ResolveOptions, Topology
from malaunch.topology import envparse
from malaunch.topology.ranktable.formats import parse_table
from malaunch.topology.ranktable.identity import find_this_node
from malaunch.topology.ranktable.read import Location, NotReady, read_once, wait_ready
from malaunch.topology.ranktable.schema import Server, Table, gc_paused
from malaunch.topology.ranktable.write import converted_path, v1_text, write_table
from malaunch.wording import plural, spans

SOURCE_NAME = "ranktable"
V1_VAR = "RANK_TABLE_FILE_V_1_0"
TABLE_VAR = "RANK_TABLE_FILE"
# Module constant so tests can point it elsewhere; ModelArts' bootstrap uses this default.
DEFAULT_PATH = Path("/user/config/jobstart_hccl.json")


def detect(env: Mapping[str, str]) -> bool:
    """True when a rank table is named by the environment or sits at ModelArts' default path."""
    return bool(env.get(V1_VAR) or env.get(TABLE_VAR)) or DEFAULT_PATH.exists()


def locate(env: Mapping[str, str]) -> Location:
    """Where the rank table is (or will appear), and which variable said so."""
    named = env.get(V1_VAR)
    if named:
        if Path(named).is_dir():
            msg = f"{V1_VAR}={named}: is a directory; expected a template-1 rank table file"
            raise TopologyError(msg)
        return Location(Path(named), f"from {V1_VAR}")
    named = env.get(TABLE_VAR)
    if named:
        return Location(Path(named), f"from {TABLE_VAR}", directory_ok=True)
    if DEFAULT_PATH.exists():
        return Location(DEFAULT_PATH, "the ModelArts default path")
    msg = f"no rank table: {V1_VAR} and {TABLE_VAR} are not set and {DEFAULT_PATH} does not exist"
    raise MissingInputError(msg)


def resolve(env: Mapping[str, str], options: ResolveOptions) -> Topology:
    """Wait for the rank table, validate it, find this node and build the Topology.

    A template-2 table is written as template 1 to ``$MA_MOUNT_PATH/rank_table/`` or
    ``<log dir>/rank_table/``; ``Topology.rank_table_file`` is that file, or the original
    file for template-1 input.
    """
    ready = wait_ready(locate(env), options.wait_timeout, options.poll_interval)
    with gc_paused():
        table = parse_table(ready.data, f"rank table {ready.path}")
        node_rank = find_this_node(table, env, options.hostnames)
        if table.layout == "template 2":
            target = converted_path(env, options.log_dir)
            write_table(target, v1_text(table))
        else:
            target = ready.path.absolute()
        return build_topology(table, node_rank, env, str(target))


def build_topology(
    table: Table, node_rank: int, env: Mapping[str, str], rank_table_file: str
) -> Topology:
    """The Topology of a validated table, validated by pydantic once for all devices."""
    nodes = [_node(index, server) for index, server in enumerate(table.servers)]
    for node in nodes:  # an address peers will dial: never "$(id)" or a control character
        envparse.check_host(node["host"], f"rank table {rank_table_file}: server {node['index']}")
    return Topology.model_validate(
        {
            "source": SOURCE_NAME,
            "nodes": nodes,
            "node_rank": node_rank,
            "master_addr": nodes[0]["host"],  # nodes are in rank order: node 0 holds rank 0
            "master_port": None,  # the framework plugin picks its own rendezvous port
            "job_id": envparse.job_id(env),
            "rank_table_file": rank_table_file,
        }
    )


def _node(index: int, server: Server) -> Dict[str, Any]:
    # In-container index: the position in this server's ascending list of physical ids
    # (a pod holding NPUs 4-7 sees them as 0-3).
    ascending = sorted(entry.device_id for entry in server.devices)
    local = {device_id: position for position, device_id in enumerate(ascending)}
    # Entries sort by rank first, so devices (and local ranks) follow rank_id, not list order.
    devices = [
        {
            "rank": entry.rank,
            "local_index": local[entry.device_id],
            "device_id": entry.device_id,
            "device_ip": entry.device_ip,
        }
        for entry in sorted(server.devices)
    ]
    return {"index": index, "host": node_host(server), "name": server.pod_name, "devices": devices}


def node_host(server: Server) -> str:
    """The address peers reach a server at: its ``server_id``, unless that is no address.

    ascend-operator writes the pod UID as ``server_id``; its ``container_ip`` (pod IP), else
    ``host_ip`` (node IP), is then the reachable address.
    """
    fallback = server.container_ip or server.host_ip
    if fallback is None:
        return server.server_id
    try:
        ipaddress.ip_address(server.server_id)
    except ValueError:
        return fallback
    return server.server_id


def _load_now(path: Path) -> Table:
    """Read and validate one file without waiting; each not-ready reason gets its exit code."""
    where = f"rank table {path}"
    found = read_once(path)
    if isinstance(found, NotReady):
        if found.kind == "missing":
            raise MissingInputError(f"{where}: {found.reason}")
        if found.kind == "malformed":
            raise TopologyError(f"{where}: {found.reason}")
        msg = f'{where}: not ready: {found.reason}; a launch would wait until it is "completed"'
        raise NotReadyError(msg)
    return parse_table(found.data, where)


def describe_file(path: Path) -> str:
    """Validate one rank table file (no waiting) and summarise it.

    Raises :class:`MissingInputError` (66) when the file does not exist, :class:`TopologyError`
    (65) when it is empty, not JSON or invalid, and :class:`NotReadyError` (69) when its status
    is not "completed".
    """
    with gc_paused():
        table = _load_now(path)
    version = f" version {table.version}" if table.layout == "template 1" else ""
    servers = plural(len({server.server_id for server in table.servers}), "server")
    count = f"{servers}, {plural(table.rank_count, 'rank')}"
    if table.layout == "template 2":
        count = f"{plural(len(table.servers), 'pod')} on {count} (pods in pod-name index order)"
    lines = [f"{table.where}: {table.layout}{version}, status completed", count, *table.details]
    for server in table.servers:
        pod = f" pod {server.pod_name}" if server.pod_name else ""
        ranks = spans(entry.rank for entry in server.devices)
        ids = spans(entry.device_id for entry in server.devices)
        lines.append(f"server {server.server_id}{pod}: ranks {ranks}, device ids {ids}")
    return "\n".join(lines)


def convert_file(source: Path, target: Path) -> str:
    """Write the template-1 equivalent of ``source`` to ``target``; return a one-line summary.

    Template 2 is converted to version 1.0; template-1 input (1.0 or 1.2) keeps its version and
    is rewritten normalised (numbers as strings). No waiting: errors as :func:`describe_file`;
    a ``target`` that is a directory, FIFO or device is refused (64), a link to a file is
    followed.
    """
    destination = output_path(target, "TARGET")
    with gc_paused():
        table = _load_now(source)
        write_table(destination, v1_text(table))
    template1 = table.layout == "template 1"
    version = table.version if template1 else "1.0"
    servers = plural(len({server.server_id for server in table.servers}), "server")
    origin = f"{table.layout} version {table.version}" if template1 else table.layout
    return (
        f"wrote {target}: template 1 version {version}, {servers}, "
        f"{plural(table.rank_count, 'rank')} (from {origin} {source})"
    )
