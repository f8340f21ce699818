"""Stands in for a MindSpore rank-table (HCCL) job where there is no NPU: checks its environment.

A real Ascend job reads ``RANK_TABLE_FILE``, ``RANK_ID``, ``DEVICE_ID`` ... and HCCL refuses to
start when they disagree. Here nothing can open a device, so this script asserts what HCCL and
MindSpore would rely on, exactly as malaunch's ``mindspore`` plugin must provide it:

- ``RANK_TABLE_FILE`` is a template-1 (``version`` "1.0", ``status`` "completed") rank table;
- the entry whose ``rank_id`` == ``RANK_ID`` is on a server whose ascending device list puts its
  ``device_id`` at position ``DEVICE_ID`` == ``ASCEND_DEVICE_ID``;
- that server is this node when ``MA_CURRENT_HOST_IP`` says which node this is;
- ``RANK_SIZE`` == devices in the table; ``JOB_ID`` and ``HCCL_CONNECT_TIMEOUT`` are set;
- the working directory is the per-device one (``device<DEVICE_ID>``, under
  ``$MA_MOUNT_PATH/workspace`` when set); ``ASCEND_PROCESS_LOG_PATH`` is an existing directory.

Prints one ``rank R/N ... ok`` line, or exits 1 with the first mismatch. Plain Python: no
MindSpore import.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple


class Mismatch(Exception):
    """The environment disagrees with the rank table."""


def need(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise Mismatch(f"{name} is not set")
    return value


def need_int(name: str) -> int:
    value = need(name)
    if not value.isdigit():
        raise Mismatch(f"{name}={value!r} is not a non-negative integer")
    return int(value)


def load_table(path: Path) -> Dict[str, Any]:
    if not path.is_file():
        raise Mismatch(f"RANK_TABLE_FILE={path}: not a file")
    table: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if table.get("version") != "1.0" or "server_list" not in table:
        raise Mismatch(
            f"{path}: not a template-1 v1.0 rank table (version={table.get('version')!r})"
        )
    if table.get("status") != "completed":
        raise Mismatch(f"{path}: status is {table.get('status')!r}, expected 'completed'")
    return table


def find_rank(table: Dict[str, Any], rank: int) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The (server, device) entries holding ``rank``."""
    for server in table["server_list"]:
        for device in server["device"]:
            if int(device["rank_id"]) == rank:
                return server, device
    raise Mismatch(f"RANK_ID={rank}: no device with that rank_id in the rank table")


def check() -> str:
    path = Path(need("RANK_TABLE_FILE"))
    table = load_table(path)
    rank, size = need_int("RANK_ID"), need_int("RANK_SIZE")
    device_index, ascend_index = need_int("DEVICE_ID"), need_int("ASCEND_DEVICE_ID")
    job_id = need("JOB_ID")
    need_int("HCCL_CONNECT_TIMEOUT")
    total = sum(len(server["device"]) for server in table["server_list"])
    if size != total:
        raise Mismatch(f"RANK_SIZE={size} but the rank table lists {total} devices")
    server, device = find_rank(table, rank)
    ids: List[int] = sorted(int(d["device_id"]) for d in server["device"])
    position = ids.index(int(device["device_id"]))
    if not device_index == ascend_index == position:
        raise Mismatch(
            f"rank {rank} is device_id {device['device_id']} of server {server['server_id']} "
            f"(position {position} in {ids}) but DEVICE_ID={device_index} "
            f"ASCEND_DEVICE_ID={ascend_index}"
        )
    host_ip = os.environ.get("MA_CURRENT_HOST_IP")
    if host_ip and server["server_id"] != host_ip:
        raise Mismatch(f"rank {rank} is on server {server['server_id']}, not this node {host_ip}")
    check_dirs(device_index)
    return (
        f"rank {rank}/{size}: server {server['server_id']} device_id {device['device_id']} "
        f"-> DEVICE_ID {device_index}, job {job_id}, cwd {Path.cwd().name} ok"
    )


def check_dirs(device_index: int) -> None:
    cwd = Path.cwd().resolve()
    if cwd.name != f"device{device_index}":
        raise Mismatch(f"working directory {cwd} is not the folder device{device_index}")
    mount = os.environ.get("MA_MOUNT_PATH")
    if mount and cwd != (Path(mount) / "workspace" / f"device{device_index}").resolve():
        raise Mismatch(
            f"working directory {cwd} is not $MA_MOUNT_PATH/workspace/device{device_index}"
        )
    log_path = Path(need("ASCEND_PROCESS_LOG_PATH"))
    if not log_path.is_dir():
        raise Mismatch(f"ASCEND_PROCESS_LOG_PATH={log_path} is not a directory")


def main() -> int:
    try:
        print(check(), flush=True)
    except (Mismatch, OSError, ValueError, KeyError) as exc:
        rank = os.environ.get("RANK_ID", "?")
        print(f"rank {rank}: rank-table check FAILED: {type(exc).__name__}: {exc}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
