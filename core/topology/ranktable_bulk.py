"""The common case of a device list, checked with whole-list operations.

A 1024-server table has 8192 devices; checking them one by one in Python costs more than the
rest of a launch's start-up. Nearly every table is what the producers write: objects with
digit-string ids and one distinct address each. These functions check exactly that with list
operations that run in C, and answer None for anything else (integers, a missing key, empty,
"-1", spaced or comma-separated addresses, any duplicate). The caller then walks the list one device
at a time, which accepts what is valid and names the JSON path of what is not. Nothing is
recorded unless the whole list passes, so that walk starts from a clean state.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any, Dict, List, Optional, Sequence, Tuple

# address or device id -> (device list path, index), to name the earlier one in messages
Places = Dict[Any, Tuple[str, int]]


def numbers(devices: Sequence[Any], key: str) -> Optional[List[int]]:
    """``device[key]`` of every device when all are strings of ASCII digits, else None."""
    try:
        raw = [device[key] for device in devices]
        joined = "".join(raw)  # TypeError unless every value is a string
    except (TypeError, KeyError):
        return None
    # all(raw): no empty string hides between the digits of the others.
    if not (all(raw) and joined.isdigit() and joined.isascii()):
        return None
    return list(map(int, raw))


def addresses(devices: Sequence[Any]) -> Optional[List[str]]:
    """Every ``device_ip`` when each is one plain, non-empty address, else None."""
    try:
        raw = [device.get("device_ip") for device in devices]
        joined = "".join(raw)  # TypeError when one is absent (None) or not a string
    except (TypeError, AttributeError):
        return None
    if not all(raw) or "-1" in raw or "," in joined or " " in joined:
        return None
    return raw


def unique_into(values: Sequence[Any], taken: Places, list_path: str) -> bool:
    """Record ``values`` in ``taken`` if none repeats (in the list or with ``taken``)."""
    if len(set(values)) != len(values) or not taken.keys().isdisjoint(values):
        return False
    taken.update(zip(values, zip(repeat(list_path), range(len(values)))))
    return True


def device_list(
    devices: Sequence[Any], list_path: str, ids_taken: Places, ips_taken: Places
) -> Optional[Tuple[List[int], List[str]]]:
    """(device ids, device ips) of a common-case list, recorded as taken; else None."""
    ids = numbers(devices, "device_id")
    if ids is None or len(set(ids)) != len(ids) or not ids_taken.keys().isdisjoint(ids):
        return None
    ips = addresses(devices)
    if ips is None or not unique_into(list(map(str.lower, ips)), ips_taken, list_path):
        return None
    unique_into(ids, ids_taken, list_path)
    return ids, ips
