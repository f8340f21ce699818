"""Template 1 rank tables (``server_list``), versions "1.0" and "1.2" (SuperPoD).

Checks what HCCL would reject at start-up (platform-conventions §1.2, §1.9), so the launcher
fails with a message naming the JSON path instead of a hang in HCCL.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from malaunch.topology.ranktable_schema import (
    MISSING,
    Entry,
    Server,
    Table,
    UniqueIps,
    a_list,
    an_object,
    check_count,
    fail,
    number,
    optional_text,
    shown,
    text,
)
from malaunch.topology.ranktable_superpod import SuperIds, check_super_pods, super_device_ids


def parse_template1(data: Mapping[str, Any], where: str, version: str) -> Table:
    """Validate a template-1 document; servers come back ordered by their lowest rank."""
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
        server = _server(an_object(raw, where, path), path, where, ips)
        if server.server_id in seen_ids:
            what = (
                f"duplicate server id {shown(server.server_id)} (also {seen_ids[server.server_id]})"
            )
            fail(where, f"{path}.server_id", what)
        seen_ids[server.server_id] = path
        servers.append(server)
        if version == "1.2":
            super_ids[server.server_id] = super_device_ids(raw, path, where)
    _check_host_ips(servers, where)
    _check_ranks(servers, where)
    details: Tuple[str, ...] = ()
    if version == "1.2":
        details = check_super_pods(data.get("super_pod_list", MISSING), servers, super_ids, where)
    servers.sort(key=lambda server: min(entry.rank for entry in server.devices))
    return Table(where, "template 1", version, tuple(servers), data, details)


def _server(raw: Dict[str, Any], path: str, where: str, ips: UniqueIps) -> Server:
    server_id = text(raw.get("server_id", MISSING), where, f"{path}.server_id")
    devices = a_list(raw.get("device", MISSING), where, f"{path}.device")
    entries: List[Entry] = []
    first_seen: Dict[int, int] = {}
    for index, item in enumerate(devices):
        dpath = f"{path}.device[{index}]"
        device = an_object(item, where, dpath)
        device_id = number(device.get("device_id", MISSING), where, f"{dpath}.device_id")
        if device_id in first_seen:
            what = (
                f"duplicate device id {shown(device['device_id'])} in server {server_id} "
                f"(also {path}.device[{first_seen[device_id]}])"
            )
            fail(where, f"{dpath}.device_id", what)
        first_seen[device_id] = index
        device_ip = optional_text(device.get("device_ip", MISSING), where, f"{dpath}.device_ip")
        ips.add(device_ip, f"{dpath}.device_ip")
        rank = number(device.get("rank_id", MISSING), where, f"{dpath}.rank_id")
        entries.append(Entry(rank, device_id, device_ip))
    return Server(
        server_id=server_id,
        devices=tuple(entries),
        path=path,
        host_ip=optional_text(raw.get("host_ip", MISSING), where, f"{path}.host_ip"),
        container_ip=optional_text(raw.get("container_ip", MISSING), where, f"{path}.container_ip"),
    )


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
    total = sum(len(server.devices) for server in servers)
    owner: List[Optional[str]] = [None] * total
    for server in servers:
        for index, entry in enumerate(server.devices):
            if entry.rank < total and owner[entry.rank] is None:
                owner[entry.rank] = f"{server.path}.device[{index}]"
                continue
            path = f"{server.path}.device[{index}].rank_id"
            if entry.rank >= total:
                what = (
                    f'rank id "{entry.rank}" is out of range: {total} devices are listed, '
                    f"so rank ids must be 0..{total - 1} without gaps"
                )
            else:
                what = f'duplicate rank id "{entry.rank}" (also {owner[entry.rank]})'
            fail(where, path, what)
