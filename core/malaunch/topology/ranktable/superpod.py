"""Version "1.2" (Atlas A3 SuperPoD) rules: ``super_device_id`` and ``super_pod_list``.

HCCL's checks (platform-conventions §1.3): ``super_pod_list`` is optional; when present,
super pod ids are unique, every listed server exists, every super pod holds the same number of
servers and together they hold every server; each device then needs a ``super_device_id``
that is unique inside its super pod.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.topology.ranktable.schema import (
    MISSING,
    Server,
    a_list,
    an_object,
    fail,
    number,
    shown,
    text,
)

# Per server: (super_device_id or None when absent, JSON path of the key), in device order.
SuperIds = List[Tuple[Optional[int], str]]


def super_device_ids(raw: Mapping[str, Any], path: str, where: str) -> SuperIds:
    """The ``super_device_id`` of each device of one (already validated) server entry."""
    found: SuperIds = []
    for index, device in enumerate(raw["device"]):
        key_path = f"{path}.device[{index}].super_device_id"
        value = device.get("super_device_id", MISSING)
        found.append((None if value is MISSING else number(value, where, key_path), key_path))
    return found


def check_super_pods(
    raw: Any, servers: Sequence[Server], super_ids: Mapping[str, SuperIds], where: str
) -> Tuple[str, ...]:
    """Validate ``super_pod_list``; return lines describing the super pods."""
    if raw is MISSING or raw is None:
        return ("super pods: none listed (super_pod_list is optional)",)
    pods = a_list(raw, where, "super_pod_list")
    known = {server.server_id for server in servers}
    pod_of: Dict[str, str] = {}
    pod_ids: Dict[str, str] = {}
    sizes: List[int] = []
    lines: List[str] = []
    for index, item in enumerate(pods):
        path = f"super_pod_list[{index}]"
        pod = an_object(item, where, path)
        pod_id = _pod_id(pod.get("super_pod_id", MISSING), where, f"{path}.super_pod_id")
        if pod_id in pod_ids:
            fail(
                where,
                f"{path}.super_pod_id",
                f"duplicate super pod id {shown(pod_id)} (also {pod_ids[pod_id]})",
            )
        pod_ids[pod_id] = path
        members = _members(pod, path, known, pod_of, where)
        _check_unique_super_ids(members, super_ids, pod_id, where)
        sizes.append(len(members))
        lines.append(f"super pod {pod_id}: servers {', '.join(members)}")
    if len(set(sizes)) > 1:
        fail(
            where,
            "super_pod_list",
            f"super pods must hold the same number of servers, found {sizes}",
        )
    unlisted = [server.server_id for server in servers if server.server_id not in pod_of]
    if unlisted:
        fail(where, "super_pod_list", f"server {shown(unlisted[0])} is in no super pod")
    return tuple(lines)


def _pod_id(value: Any, where: str, path: str) -> str:
    if type(value) is int and value >= 0:
        return str(value)
    return text(value, where, path)


def _members(
    pod: Mapping[str, Any], path: str, known: Any, pod_of: Dict[str, str], where: str
) -> List[str]:
    members: List[str] = []
    for index, item in enumerate(
        a_list(pod.get("server_list", MISSING), where, f"{path}.server_list")
    ):
        member_path = f"{path}.server_list[{index}].server_id"
        entry = an_object(item, where, f"{path}.server_list[{index}]")
        server_id = text(entry.get("server_id", MISSING), where, member_path)
        if server_id not in known:
            fail(where, member_path, f"server {shown(server_id)} is not in server_list")
        if server_id in pod_of:
            fail(where, member_path, f"server {shown(server_id)} is already in {pod_of[server_id]}")
        pod_of[server_id] = path
        members.append(server_id)
    return members


def _check_unique_super_ids(
    members: Sequence[str], super_ids: Mapping[str, SuperIds], pod_id: str, where: str
) -> None:
    seen: Dict[int, str] = {}
    for server_id in members:
        for value, path in super_ids[server_id]:
            if value is None:
                fail(
                    where,
                    path,
                    "missing: every device needs a super_device_id when super_pod_list is given",
                )
            if value in seen:
                what = f'duplicate super device id "{value}" in super pod {pod_id}'
                what += f" (also {seen[value]})"
                fail(where, path, what)
            seen[value] = path
