"""The template-1 file processes receive: converted from template 2, or template 1 normalised.

Numbers are written as JSON strings (every producer but merge_hccl.py does so, and HCCL's
acceptance of integers is not verified). Files are replaced atomically, so a process or a
second launcher never reads a half-written table.
"""

from __future__ import annotations

import json

# The C string encoder json.dumps itself uses: quotes and escapes one string as JSON.
from json.encoder import encode_basestring_ascii as quote
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from malaunch.errors import OutputError
from malaunch.files import why_not_written, write_atomic
from malaunch.topology.ranktable.schema import Server, Table

CONVERTED_NAME = "jobstart_hccl.json"


def converted_path(env: Mapping[str, str], log_dir: str) -> Path:
    """Where a converted table goes: ``$MA_MOUNT_PATH/rank_table/``, else the log dir's."""
    base = env.get("MA_MOUNT_PATH") or log_dir
    return (Path(base) / "rank_table" / CONVERTED_NAME).absolute()


def v1_text(table: Table) -> str:
    """The template-1 JSON text equivalent to ``table``."""
    if table.layout == "template 2":
        return _from_template2(table.servers)
    return render(_normalised(table))


def _from_template2(servers: Sequence[Server]) -> str:
    # Pods sharing a server_id (partial-node allocations) become one server entry, as in
    # ModelArts' converter: template 1 requires unique server ids. Entries keep the order in
    # which their first rank appears, devices their rank order. The parser has checked that
    # such pods hold different devices.
    merged: Dict[str, List[str]] = {}
    for server in servers:
        merged.setdefault(server.server_id, []).extend(_device_texts(server))
    lines = ",\n".join(
        f'        {{"server_id": {quote(key)}, "device": [{", ".join(value)}]}}'
        for key, value in merged.items()
    )
    head = f'    "status": "completed",\n    "version": "1.0",\n    "server_count": "{len(merged)}"'
    return f'{{\n{head},\n    "server_list": [\n{lines}\n    ]\n}}\n'


def _device_texts(server: Server) -> List[str]:
    """One JSON object per device, written directly: a 10k-device table is converted on every
    launch, and this is several times faster than building dicts for ``json.dumps``."""
    return [
        f'{{"device_id": "{device_id}", "device_ip": {quote(ip)}, "rank_id": "{rank}"}}'
        if ip is not None
        else f'{{"device_id": "{device_id}", "rank_id": "{rank}"}}'
        for rank, device_id, ip in server.devices
    ]


def _strings(item: Mapping[str, Any]) -> Dict[str, Any]:
    return {key: str(value) if type(value) is int else value for key, value in item.items()}


def _normalised(table: Table) -> Dict[str, Any]:
    """Template 1 as read, with every integer written as a string; unknown keys kept."""
    parsed = {server.server_id: server for server in table.servers}
    server_list = []
    for raw in table.raw["server_list"]:
        server = parsed[raw["server_id"]]
        entry = _strings(raw)
        entry["device"] = [
            dict(
                _strings(device),
                device_id=str(parsed_device.device_id),
                rank_id=str(parsed_device.rank),
            )
            for device, parsed_device in zip(raw["device"], server.devices)
        ]
        server_list.append(entry)
    document: Dict[str, Any] = {
        "status": "completed",
        "version": table.version,
        "server_count": str(len(server_list)),
    }
    if table.raw.get("super_pod_list"):
        document["super_pod_list"] = [
            dict(_strings(pod), server_list=[_strings(member) for member in pod["server_list"]])
            for pod in table.raw["super_pod_list"]
        ]
    document["server_list"] = server_list
    return document


def render(document: Mapping[str, Any]) -> str:
    """JSON text with one server per line: readable, and as fast as compact output."""
    # json.dumps(indent=...) falls back to the pure-Python encoder, ~10x slower on big tables.
    head = [
        f"    {json.dumps(key)}: {json.dumps(value)}"
        for key, value in document.items()
        if key != "server_list"
    ]
    servers = ",\n".join(f"        {json.dumps(server)}" for server in document["server_list"])
    head.append(f'    "server_list": [\n{servers}\n    ]')
    return "{\n" + ",\n".join(head) + "\n}\n"


def write_table(target: Path, content: str) -> None:
    """Write a rank table atomically (HCCL and other nodes may read it at any moment)."""
    try:
        write_atomic(target, content)
    except OSError as exc:
        msg = f"cannot write rank table {target}: {why_not_written(target, exc)}"
        raise OutputError(msg) from exc
