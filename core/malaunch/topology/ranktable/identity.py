"""Which entry of a rank table is this container (platform-conventions §10 item 11).

Order of evidence: the pod name (template 2: ``MA_CURRENT_INSTANCE_NAME``, else ``HOSTNAME``);
the only server of a one-server table; the node addresses the platform injects
(``MA_CURRENT_HOST_IP``, ``XDL_IP``); this host's own names and addresses (looked up only when
needed) and ``MA_CURRENT_IP``, compared with ``server_id`` / ``host_ip`` / ``container_ip``.
Several pods can share a node IP, so an address that matches several entries is an error
unless a pod name settles it.
"""

from __future__ import annotations

import contextlib
import ipaddress
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from malaunch.errors import TopologyError
from malaunch.topology.ranktable.schema import Server, Table
from malaunch.wording import first_of

NODE_ADDRESS_VARS = ("MA_CURRENT_HOST_IP", "XDL_IP")
LISTED = 6  # how many candidates an error message names before "... (N more)"


def normalise(address: str) -> str:
    """Compare IPv4/IPv6 addresses by value (``2001:DB8::1`` = ``2001:db8:0::1``), names by case."""
    value = address.strip().strip("[]").split("%")[0].lower()
    if ":" not in value:
        return value  # IPv4 and names have one usual spelling; skip the slower parse
    try:
        return ipaddress.ip_address(value).compressed
    except ValueError:
        return value


def host_addresses() -> Tuple[str, ...]:
    """This machine's host name and the addresses it resolves to (no network I/O beyond that)."""
    import socket  # noqa: PLC0415 (only needed when the table alone cannot tell)

    name = socket.gethostname()
    found = [name]
    # An unresolvable host name can still match a server_id spelled as a name.
    with contextlib.suppress(OSError):
        found.extend(str(info[4][0]) for info in socket.getaddrinfo(name, None))
    return tuple(dict.fromkeys(found))


def find_this_node(
    table: Table,
    env: Mapping[str, str],
    hostnames: Optional[Sequence[str]],
    lookup: Callable[[], Tuple[str, ...]] = host_addresses,
) -> int:
    """Index into ``table.servers`` of this container's entry."""
    pod_var = next((v for v in ("MA_CURRENT_INSTANCE_NAME", "HOSTNAME") if env.get(v)), None)
    pod_name = env[pod_var] if pod_var else None
    if table.layout == "template 2" and pod_name:
        for index, server in enumerate(table.servers):
            if server.pod_name == pod_name:
                return index
        if pod_var == "MA_CURRENT_INSTANCE_NAME":
            names = _listing([server.pod_name or "" for server in table.servers])
            msg = (
                f"{table.where}: no pod_name is {pod_name!r} (MA_CURRENT_INSTANCE_NAME); "
                f"pods: {names}"
            )
            raise TopologyError(msg)
    if len(table.servers) == 1:
        return 0
    return _by_address(table, env, hostnames, lookup, pod_name and f"{pod_name!r} ({pod_var})")


def _by_address(
    table: Table,
    env: Mapping[str, str],
    hostnames: Optional[Sequence[str]],
    lookup: Callable[[], Tuple[str, ...]],
    pod: Optional[str],
) -> int:
    """Match the platform's node addresses first; this host's own only when those do not tell."""
    servers = table.servers
    tried: List[str] = []
    env_addresses = [(env[v], v) for v in NODE_ADDRESS_VARS if env.get(v)]
    first = _matches(servers, env_addresses, tried)
    if len(first) == 1:
        return first.pop()
    local = [(a, "this host") for a in (hostnames if hostnames is not None else lookup())]
    if env.get("MA_CURRENT_IP"):
        local.append((env["MA_CURRENT_IP"], "MA_CURRENT_IP"))
    second = _matches(servers, local, tried)
    found = first & second if first and second else first or second
    if len(found) == 1:
        return found.pop()
    if found:
        raise TopologyError(_ambiguous(table, sorted(found), tried))
    raise TopologyError(_no_match(table, tried, pod))


def _keys(server: Server) -> Tuple[str, ...]:
    return tuple(normalise(a) for a in (server.server_id, server.host_ip, server.container_ip) if a)


def _matches(
    servers: Sequence[Server], addresses: Sequence[Tuple[str, str]], tried: List[str]
) -> Set[int]:
    wanted: Dict[str, str] = {normalise(a): a for a, _ in addresses if a}
    tried.extend(f"{a} ({origin})" for a, origin in addresses if a)
    if not wanted:
        return set()
    return {i for i, server in enumerate(servers) if wanted.keys() & set(_keys(server))}


def _listing(items: Sequence[str]) -> str:
    return first_of(items, LISTED)


def _label(server: Server) -> str:
    return f"{server.pod_name} on {server.server_id}" if server.pod_name else server.server_id


def _ambiguous(table: Table, found: Sequence[int], tried: Sequence[str]) -> str:
    servers = _listing([_label(table.servers[i]) for i in found])
    hint = (
        "set MA_CURRENT_INSTANCE_NAME to this pod's name"
        if table.layout == "template 2"
        else ("set MA_CURRENT_HOST_IP or XDL_IP to an address only this server has")
    )
    mine = _listing(list(tried))
    return f"{table.where}: this node's addresses {mine} match several servers: {servers}; {hint}"


def _no_match(table: Table, tried: Sequence[str], pod: Optional[str]) -> str:
    keys = _listing(["/".join(_keys(server)) for server in table.servers])
    mine = _listing(list(tried)) or "none (set MA_CURRENT_HOST_IP)"
    pods = f"pod name {pod} matched no pod_name; " if pod and table.layout == "template 2" else ""
    return (
        f"{table.where}: cannot tell which server is this node: {pods}compared addresses {mine} "
        f"with server_id/host_ip/container_ip of the servers: {keys}"
    )
