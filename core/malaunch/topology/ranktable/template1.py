"""Template 1 rank tables (``server_list``), versions "1.0" and "1.2" (SuperPoD).

Checks what HCCL would reject at start-up (platform-conventions §1.2, §1.9), so the launcher
fails with a message naming the JSON path instead of a hang in HCCL.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from malaunch.topology.ranktable.bulk import Collected, NotCommon, addresses, numbers
from malaunch.topology.ranktable.schema import (
    MISSING,
    Entry,
    Server,
    Table,
    UniqueIps,
    a_device_list,
    a_list,
    an_object,
    check_count,
    digits_at,
    fail,
    host,
    optional_host,
    shown,
    text_at,
)
from malaunch.topology.ranktable.superpod import SuperIds, check_super_pods, super_device_ids
from malaunch.wording import noun_for, plural


def parse_template1(data: Mapping[str, Any], where: str, version: str) -> Table:
    """Validate a template-1 document; servers come back ordered by their lowest rank."""
    try:
        return _parse(data, where, version, Collected())
    except NotCommon:
        return _parse(data, where, version, None)


def _parse(data: Mapping[str, Any], where: str, version: str, bulk: Optional[Collected]) -> Table:
    server_list = a_list(data.get("server_list", MISSING), where, "server_list")
    check_count(
        data.get("server_count", MISSING), len(server_list), where, "server_count", "servers"
    )
    ips = UniqueIps(where)
    seen_ids: Dict[str, str] = {}
    servers: List[Server] = []
    super_ids: Dict[str, SuperIds] = {}
    for index, raw in enumerate(server_list):
        path = f"server_list[{index}]"
        server = _server(an_object(raw, where, path), path, where, ips, bulk)
        if server.server_id in seen_ids:
            what = (
                f"duplicate server id {shown(server.server_id)} (also {seen_ids[server.server_id]})"
            )
            fail(where, f"{path}.server_id", what)
        seen_ids[server.server_id] = path
        servers.append(server)
        if version == "1.2":
            super_ids[server.server_id] = super_device_ids(raw, path, where)
    if bulk is not None:
        bulk.check()
    _check_host_ips(servers, where)
    _check_ranks(servers, where)
    details: Tuple[str, ...] = ()
    if version == "1.2":
        details = check_super_pods(data.get("super_pod_list", MISSING), servers, super_ids, where)
    servers.sort(key=lambda server: min(entry.rank for entry in server.devices))
    return Table(where, "template 1", version, tuple(servers), data, details)


def _server(
    raw: Dict[str, Any], path: str, where: str, ips: UniqueIps, bulk: Optional[Collected]
) -> Server:
    server_id = host(raw.get("server_id", MISSING), where, f"{path}.server_id")
    list_path = f"{path}.device"
    devices = a_device_list(raw.get("device", MISSING), where, list_path)
    if bulk is not None:
        ids, addresses_ = numbers(devices, "device_id"), addresses(devices)
        bulk.add(server_id, ids, addresses_)
        entries = tuple(map(Entry, numbers(devices, "rank_id"), ids, addresses_))
    else:
        entries = _devices_one_by_one(devices, list_path, server_id, where, ips)
    return Server(
        server_id=server_id,
        devices=entries,
        path=path,
        host_ip=optional_host(raw.get("host_ip", MISSING), where, f"{path}.host_ip"),
        container_ip=optional_host(raw.get("container_ip", MISSING), where, f"{path}.container_ip"),
    )


def _devices_one_by_one(
    devices: List[Any], list_path: str, server_id: str, where: str, ips: UniqueIps
) -> Tuple[Entry, ...]:
    """Each device checked on its own: accepts any valid spelling, names what is wrong."""
    entries: List[Entry] = []
    first_seen: Dict[int, int] = {}
    for index, device in enumerate(devices):
        if type(device) is not dict:
            an_object(device, where, f"{list_path}[{index}]")
        device_id = digits_at(device, "device_id", where, list_path, index)
        if device_id in first_seen:
            what = (
                f"duplicate device id {shown(device['device_id'])} in server {server_id} "
                f"(also {list_path}[{first_seen[device_id]}])"
            )
            fail(where, f"{list_path}[{index}].device_id", what)
        first_seen[device_id] = index
        device_ip = text_at(device, "device_ip", where, list_path, index)
        ips.add(device_ip, list_path, index)
        rank = digits_at(device, "rank_id", where, list_path, index)
        entries.append(Entry(rank, device_id, device_ip))
    return tuple(entries)


def _check_host_ips(servers: List[Server], where: str) -> None:
    """HCCL switches to host-NIC mode per rank when host_ip is set: all servers or none."""
    having = [server for server in servers if server.host_ip]
    if not having or len(having) == len(servers):
        return
    lacking = next(server for server in servers if not server.host_ip)
    what = (
        f"missing, but {having[0].path} has host_ip {shown(having[0].host_ip)} "
        "(HCCL needs host_ip on every server or on none)"
    )
    fail(where, f"{lacking.path}.host_ip", what)


def _check_ranks(servers: List[Server], where: str) -> None:
    """rank_id values must be exactly 0..N-1: no duplicates and nothing out of range."""
    ranks = [entry.rank for server in servers for entry in server.devices]
    total = len(ranks)
    if len(set(ranks)) == total and max(ranks) == total - 1:
        return  # n distinct non-negative numbers below n: exactly 0..n-1
    owner: List[Optional[str]] = [None] * total
    for server in servers:
        for index, entry in enumerate(server.devices):
            if entry.rank < total and owner[entry.rank] is None:
                owner[entry.rank] = f"{server.path}.device[{index}]"
                continue
            path = f"{server.path}.device[{index}].rank_id"
            if entry.rank >= total:
                what = (
                    f'rank id "{entry.rank}" is out of range: {plural(total, "device")} '
                    f"{noun_for(total, 'is')} listed, "
                    f"so rank ids must be 0..{total - 1} without gaps"
                )
            else:
                what = f'duplicate rank id "{entry.rank}" (also {owner[entry.rank]})'
            fail(where, path, what)
