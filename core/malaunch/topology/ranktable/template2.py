"""Template 2 rank tables (ModelArts ``jobstart_hccl.json``, hccl-controller "v1").

Ranks are not in the file. Two derivations exist (platform-conventions §1.4): HCCL's own
(servers in byte order of ``server_id``) and ModelArts' converter (pods by the integer after
the last ``-`` of ``pod_name``, devices in list order). malaunch follows the converter, whose
result it writes as a template-1 file and hands to every process, so HCCL never derives ranks
itself and both sides agree.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from malaunch.numbers import MAX_DIGITS, is_plain_int
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
    number,
    shown,
    text,
    text_at,
)
from malaunch.wording import plural


class _Pod(NamedTuple):
    order: Optional[int]  # the integer after the last "-" of pod_name
    name: str
    server_id: str
    device_ids: Sequence[int]  # in list order
    device_ips: Sequence[Optional[str]]
    path: str


class _Seen:
    """What must be unique across the whole table."""

    def __init__(self, where: str, bulk: Optional[Collected]) -> None:
        self.where = where
        self.bulk = bulk  # None: check one device at a time
        self.ips = UniqueIps(where)
        self.groups: Dict[str, str] = {}
        self.pods: Dict[str, str] = {}
        # Pods on one node (shared server_id) are merged into one template-1 server, so they
        # must not claim the same physical device.
        self.node_devices: Dict[str, Dict[int, Tuple[str, int]]] = {}


def parse_template2(data: Mapping[str, Any], where: str) -> Table:
    """Validate a template-2 document and number its ranks in pod-index order."""
    try:
        return _parse(data, _Seen(where, Collected()))
    except NotCommon:
        return _parse(data, _Seen(where, None))


def _parse(data: Mapping[str, Any], seen: _Seen) -> Table:
    where = seen.where
    groups = a_list(data.get("group_list", MISSING), where, "group_list")
    check_count(data.get("group_count", MISSING), len(groups), where, "group_count", "groups")
    servers: List[Server] = []
    details: List[str] = []
    for index, raw in enumerate(groups):
        # Ranks are numbered group by group, in group_list order.
        pods, detail = _group(
            raw, f"group_list[{index}]", seen, sum(len(s.devices) for s in servers)
        )
        servers.extend(pods)
        details.append(detail)
    if not servers:
        fail(where, "group_list", "no group has devices (every device_count is 0)")
    if seen.bulk is not None:
        seen.bulk.check()
    return Table(where, "template 2", "template 2", tuple(servers), data, tuple(details))


def _group(raw: Any, path: str, seen: _Seen, first_rank: int) -> Tuple[List[Server], str]:
    """The pods of one group as servers with ranks from ``first_rank``, and a summary line."""
    where = seen.where
    group = an_object(raw, where, path)
    name = text(group.get("group_name", MISSING), where, f"{path}.group_name")
    if name in seen.groups:
        what = f"duplicate group name {shown(name)} (also {seen.groups[name]})"
        fail(where, f"{path}.group_name", what)
    seen.groups[name] = path
    device_count = number(group.get("device_count", MISSING), where, f"{path}.device_count")
    if device_count == 0:
        # A CPU-only task (e.g. TF ps): nothing for HCCL. ModelArts' converter skips it too.
        return [], f"group {name}: skipped (device_count 0)"
    pods = _group_pods(group, path, name, device_count, seen)
    last = first_rank + device_count - 1
    ranks = f"rank {last}" if device_count == 1 else f"ranks {first_rank}-{last}"
    return _number_ranks(pods, first_rank), f"group {name}: {plural(len(pods), 'pod')}, {ranks}"


def _group_pods(
    group: Mapping[str, Any], path: str, name: str, device_count: int, seen: _Seen
) -> List[_Pod]:
    """The pods of one group, validated and sorted by pod index."""
    where = seen.where
    instances = a_list(group.get("instance_list", MISSING), where, f"{path}.instance_list")
    check_count(
        group.get("instance_count", MISSING),
        len(instances),
        where,
        f"{path}.instance_count",
        "instances",
    )
    pods = [_pod(item, f"{path}.instance_list[{i}]", seen) for i, item in enumerate(instances)]
    listed = sum(len(pod.device_ids) for pod in pods)
    if listed != device_count:
        declared = shown(group["device_count"])
        what = f"{declared} does not match the {plural(listed, 'device')} listed in instance_list"
        fail(where, f"{path}.device_count", what)
    by_index: Dict[Optional[int], _Pod] = {}
    for pod in pods:
        if pod.order is None and len(pods) > 1:
            what = f"{shown(pod.name)} does not end in -<index>: cannot order the pods of {name}"
            fail(where, f"{pod.path}.pod_name", what)
        if pod.order in by_index:
            other = shown(by_index[pod.order].name)
            what = f"pod index {pod.order} of {shown(pod.name)} is also the index of {other}"
            fail(where, f"{pod.path}.pod_name", what)
        by_index[pod.order] = pod
    # Numeric order of the index: worker-2 before worker-10, whatever the names' prefixes.
    return sorted(pods, key=lambda pod: pod.order or 0)


def pod_index(pod_name: str) -> Optional[int]:
    """The integer after the last ``-`` of a pod name, or None when there is none (or it has
    more digits than any index: see :func:`_pod_order`)."""
    suffix = pod_name.rpartition("-")[2]
    return int(suffix) if is_plain_int(suffix) else None


def _pod_order(name: str, where: str, path: str) -> Optional[int]:
    """:func:`pod_index`, refusing an index too long to be one (int() raises past 4,300
    digits; no pod is numbered past 18)."""
    suffix = name.rpartition("-")[2]
    if len(suffix) > MAX_DIGITS and suffix.isascii() and suffix.isdigit():
        fail(where, path, f'the pod index after the last "-" has {len(suffix)} digits')
    return pod_index(name)


def _pod(raw: Any, path: str, seen: _Seen) -> _Pod:
    where = seen.where
    instance = an_object(raw, where, path)
    name = text(instance.get("pod_name", MISSING), where, f"{path}.pod_name")
    if name in seen.pods:
        fail(
            where, f"{path}.pod_name", f"duplicate pod name {shown(name)} (also {seen.pods[name]})"
        )
    seen.pods[name] = path
    order = _pod_order(name, where, f"{path}.pod_name")
    server_id = host(instance.get("server_id", MISSING), where, f"{path}.server_id")
    list_path = f"{path}.devices"
    devices = a_device_list(instance.get("devices", MISSING), where, list_path)
    if seen.bulk is not None:
        ids, ips = numbers(devices, "device_id"), addresses(devices)
        seen.bulk.add(server_id, ids, ips)
        return _Pod(order, name, server_id, ids, ips, path)
    ids_and_ips = _devices_one_by_one(devices, list_path, server_id, seen)
    return _Pod(order, name, server_id, *ids_and_ips, path)


def _devices_one_by_one(
    devices: List[Any], list_path: str, server_id: str, seen: _Seen
) -> Tuple[List[int], List[Optional[str]]]:
    """Each device checked on its own: accepts any valid spelling, names what is wrong."""
    where = seen.where
    on_node = seen.node_devices.setdefault(server_id, {})
    device_ids: List[int] = []
    device_ips: List[Optional[str]] = []
    for index, device in enumerate(devices):
        if type(device) is not dict:
            an_object(device, where, f"{list_path}[{index}]")
        device_id = digits_at(device, "device_id", where, list_path, index)
        if device_id in on_node:
            other_list, other_index = on_node[device_id]
            what = (
                f"duplicate device id {shown(device['device_id'])} on server {server_id} "
                f"(also {other_list}[{other_index}])"
            )
            fail(where, f"{list_path}[{index}].device_id", what)
        on_node[device_id] = (list_path, index)
        device_ip = text_at(device, "device_ip", where, list_path, index)
        seen.ips.add(device_ip, list_path, index)
        device_ids.append(device_id)
        device_ips.append(device_ip)
    return device_ids, device_ips


def _number_ranks(pods: List[_Pod], first_rank: int) -> List[Server]:
    """Consecutive ranks, pod by pod, devices in list order (what ModelArts' converter does)."""
    servers: List[Server] = []
    rank = first_rank
    for pod in pods:
        count = len(pod.device_ids)
        entries = tuple(map(Entry, range(rank, rank + count), pod.device_ids, pod.device_ips))
        rank += count
        servers.append(Server(pod.server_id, entries, pod.path, pod_name=pod.name))
    return servers
