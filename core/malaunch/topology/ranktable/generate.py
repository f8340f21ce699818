"""``malaunch ranktable generate``: a one-server v1.0 rank table, as hccl_tools.py writes it.

On a bare-metal Ascend server nobody hands the job a rank table; hccl_tools.py builds one from
the NPU NIC addresses in ``/etc/hccn.conf`` (conventions §1.8). This does the same for one
server: devices in the given order, ``rank_id`` from 0, every number a JSON string. Merging
several servers' tables is not done here.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from malaunch.errors import TopologyError, UsageError
from malaunch.files import output_path
from malaunch.log import logger
from malaunch.numbers import is_plain_int
from malaunch.topology.envparse import is_host
from malaunch.topology.ranktable.hccn import DEFAULT_PATH, read_hccn_conf
from malaunch.topology.ranktable.write import render, write_table
from malaunch.wording import plural, shortened, spans

MAX_DEVICE = 15  # HCCL's device_id range on A2/A3/310P (0-7 on 910A)
MAX_SERVER_ID = 63  # HCCL requires server_id shorter than 64 characters
FALLBACK_SERVER_ID = "127.0.0.1"
# Any run of characters where a number goes: numbers.is_plain_int decides (``\d`` would take
# Arabic-Indic digits, and int() of 5,000 digits fails past Python's conversion limit).
_INTERVAL = re.compile(r"\[\s*([^\s,\[\]()]+)\s*,\s*([^\s,\[\]()]+)\s*([)\]])")
_RANGE = re.compile(r"([^\s-]+)\s*-\s*([^\s-]+)")


def parse_device_spec(text: str, option: str = "--devices") -> List[int]:
    """Physical device ids from ``0-7``, ``0,1,2,3``, ``0-3,6`` or ``[0,8)`` / ``[0,7]``.

    Returns the ids ascending; an id outside 0-15, an empty range or an id given twice raises
    :class:`UsageError` naming ``option``.
    """
    spec = text.strip()
    where = f'{option} "{shortened(text)}"'
    interval = _INTERVAL.fullmatch(spec)
    if interval:
        low, high = _id(interval.group(1), where), _id(interval.group(2), where)
        high -= interval.group(3) == ")"
        ids = _span(low, high, where)
    else:
        ids = []
        for item in spec.split(","):
            ids.extend(_item(item.strip(), where))
    repeated = sorted({device for device in ids if ids.count(device) > 1})
    if repeated:
        raise UsageError(f"{where}: device {repeated[0]} is given twice")
    return sorted(ids)


def _item(item: str, where: str) -> List[int]:
    if is_plain_int(item):
        return _span(int(item), int(item), where)
    found = _RANGE.fullmatch(item)
    if not found:
        msg = (
            f'{where}: "{shortened(item)}" is not a device id or range '
            "(expected e.g. 0-7, 0,1,2,3 or [0,8))"
        )
        raise UsageError(msg)
    return _span(_id(found.group(1), where), _id(found.group(2), where), where)


def _id(text: str, where: str) -> int:
    """One device id of a range: ASCII digits, at most 18 of them (the range is checked by
    :func:`_span`)."""
    if not is_plain_int(text):
        msg = f'{where}: "{shortened(text)}" is not a device id (expected a number 0-{MAX_DEVICE})'
        raise UsageError(msg)
    return int(text)


def _span(low: int, high: int, where: str) -> List[int]:
    if high < low:
        raise UsageError(f"{where}: the range holds no device")
    if high > MAX_DEVICE:
        raise UsageError(f"{where}: device {high} is out of range (0-{MAX_DEVICE})")
    return list(range(low, high + 1))


def single_server_table(
    server_id: str,
    devices: Sequence[int],
    device_ips: Mapping[int, str],
    source: str = str(DEFAULT_PATH),
) -> Dict[str, Any]:
    """The v1.0 table of one server: ``devices`` in order with rank_id 0..n-1.

    ``device_ips`` maps physical device ids to NIC addresses (from ``source``, named in the
    error when a device has none).
    """
    if not server_id or len(server_id) > MAX_SERVER_ID:
        msg = f'server id "{server_id}": expected 1-{MAX_SERVER_ID} characters'
        raise TopologyError(msg)
    if not devices:
        raise TopologyError(f"server {server_id}: no devices")
    entries = []
    for rank, device in enumerate(devices):
        if device not in device_ips:
            raise TopologyError(f"device {device}: no address_{device} line in {source}")
        entries.append(
            {"device_id": str(device), "device_ip": device_ips[device], "rank_id": str(rank)}
        )
    server = {"server_id": server_id, "device": entries, "host_nic_ip": "reserve"}
    return {"version": "1.0", "server_count": "1", "server_list": [server], "status": "completed"}


def this_host_ip() -> str:
    """This host's address as hccl_tools.py finds it, else 127.0.0.1 with a warning."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError as exc:
        logger.warning(
            f"cannot resolve this host's name ({exc}); using server id {FALLBACK_SERVER_ID} "
            "(give --server-id for a table other servers will read)"
        )
        return FALLBACK_SERVER_ID


def generate_file(target: Path, devices: str, server_id: str, hccn_conf: Path) -> str:
    """Write the table of this server to ``target`` atomically; return a one-line summary.

    ``target`` as in :func:`malaunch.files.output_path`: a link is followed, a directory, FIFO
    or device refused.
    """
    destination = output_path(target, "OUT")
    # Held to what `ranktable validate` and a launch require of a server_id (a host peers can
    # dial, shorter than 64 characters): a table they refuse is never written.
    if not is_host(server_id) or len(server_id) > MAX_SERVER_ID:
        msg = (
            f'--server-id "{shortened(server_id)}": expected a host name or address of at most '
            f"{MAX_SERVER_ID} characters"
        )
        raise UsageError(msg)
    ids = parse_device_spec(devices)
    table = single_server_table(server_id, ids, read_hccn_conf(hccn_conf), str(hccn_conf))
    write_table(destination, render(table))
    return (
        f"wrote {target}: template 1 version 1.0, server {server_id}, "
        f"{plural(len(ids), 'rank')} on devices {spans(ids)} (device IPs from {hccn_conf})"
    )
