"""What a parsed HCCL rank table is made of, and the checks every layout shares.

The parsers turn a JSON document into plain named tuples (no pydantic per device: a
1024-server table has 8192 devices and is parsed on every launch attempt); the public module
builds the ``Topology`` model once from them.
"""

from __future__ import annotations

import contextlib
import gc
import json
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, NoReturn, Optional, Tuple

from malaunch.errors import TopologyError
from malaunch.numbers import MAX_DIGITS, MAX_LOCAL_PROCESSES, is_plain_int
from malaunch.topology.envparse import is_host, is_ip
from malaunch.wording import shortened

# Marks a key that is absent, as opposed to present with JSON null.
MISSING: Any = object()


class Entry(NamedTuple):
    """One device of a server: global rank, physical device id, NIC address as written."""

    rank: int
    device_id: int
    device_ip: Optional[str]


class Server(NamedTuple):
    """A template-1 ``server_list`` entry, or one template-2 pod (``instance_list`` entry)."""

    server_id: str
    devices: Tuple[Entry, ...]  # in file order
    path: str  # JSON path of the entry, for messages
    host_ip: Optional[str] = None
    container_ip: Optional[str] = None
    pod_name: Optional[str] = None


class Table(NamedTuple):
    """A validated, completed rank table."""

    where: str  # "rank table /path/to/file", the prefix of every message about it
    layout: str  # "template 1" or "template 2"
    version: str  # "1.0" / "1.2" for template 1, "template 2" otherwise
    servers: Tuple[Server, ...]  # rank order: the server holding the lowest rank first
    raw: Mapping[str, Any]  # the document as read, for normalised rewriting
    details: Tuple[str, ...] = ()  # extra human-readable lines (groups, super pods)

    @property
    def rank_count(self) -> int:
        return sum(len(server.devices) for server in self.servers)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large table is loaded and converted.

    Tens of thousands of new dicts and tuples would otherwise set off collections that walk
    every object of the process; these structures hold no cycles, so reference counting frees
    them anyway.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def fail(where: str, path: str, what: str) -> NoReturn:
    """Raise the one error type for a malformed table, naming file and JSON path."""
    msg = f"{where}: {path}: {what}" if path else f"{where}: {what}"
    raise TopologyError(msg)


def shown(value: Any) -> str:
    """A value as it appears in JSON, for messages."""
    if value is MISSING:
        return "nothing (the key is missing)"
    return json.dumps(value, ensure_ascii=False)


def number(value: Any, where: str, path: str) -> int:
    """A count or id written as a string of digits (every producer) or a JSON integer."""
    if type(value) is str:
        if is_plain_int(value):
            return int(value)
    elif type(value) is int and 0 <= value < 10**MAX_DIGITS:
        return value
    fail(where, path, f'expected a non-negative integer such as "0", got {_short(value)}')


def _short(value: Any) -> str:
    """A value for a message: a 5,000-digit id must not make a 5,000-character line."""
    return shortened(shown(value))


def text(value: Any, where: str, path: str) -> str:
    """A required, non-empty string."""
    if type(value) is str and value:
        return value
    fail(where, path, f"expected a non-empty string, got {shown(value)}")


def host(value: Any, where: str, path: str) -> str:
    """A required host name or address (``server_id``): peers dial it and logs show it, so it
    is held to what every other host the launcher reads is (never "$(id)" or a space)."""
    name = text(value, where, path)
    if not is_host(name):
        fail(where, path, f"{_short(value)} is not a host name or address")
    return name


def optional_host(value: Any, where: str, path: str) -> Optional[str]:
    """An optional host (``host_ip``, ``container_ip``); ``""`` counts as absent."""
    name = optional_text(value, where, path)
    if name is not None and not is_host(name):
        fail(where, path, f"{_short(value)} is not a host name or address")
    return name


def optional_text(value: Any, where: str, path: str) -> Optional[str]:
    """An optional string; ``""`` counts as absent (ascend-operator writes empty keys)."""
    if value is MISSING or value is None or value == "":
        return None
    if type(value) is str:
        return value
    fail(where, path, f"expected a string, got {shown(value)}")


def a_list(value: Any, where: str, path: str) -> List[Any]:
    """A required, non-empty JSON array."""
    if type(value) is not list:
        fail(where, path, f"expected a list, got {shown(value)}")
    if not value:
        fail(where, path, "is empty")
    return value


def a_device_list(value: Any, where: str, path: str) -> List[Any]:
    """A server's (template 2: a pod's) non-empty device list, of at most
    :data:`MAX_LOCAL_PROCESSES` devices: one launcher starts a process for each, and the count is
    checked before any device is read."""
    devices = a_list(value, where, path)
    if len(devices) > MAX_LOCAL_PROCESSES:
        what = f"lists {len(devices)} devices; at most {MAX_LOCAL_PROCESSES} on one server"
        fail(where, path, what)
    return devices


def an_object(value: Any, where: str, path: str) -> Dict[str, Any]:
    if type(value) is not dict:
        fail(where, path, f"expected an object, got {shown(value)}")
    return value


def check_count(declared: Any, actual: int, where: str, path: str, what: str) -> None:
    """A declared ``*_count`` field, when present, must match what is listed."""
    if declared is MISSING:
        return
    if number(declared, where, path) != actual:
        fail(where, path, f"{shown(declared)} does not match the {actual} {what} listed")


def digits_at(item: Mapping[str, Any], key: str, where: str, list_path: str, index: int) -> int:
    """``item[key]`` as a number; the JSON path is only spelled out when it is wrong.

    This and :func:`text_at` run for every device of the table: the common case (a string of
    ASCII digits, a plain string) costs no path formatting.
    """
    value = item.get(key, MISSING)
    if type(value) is str and is_plain_int(value):
        return int(value)
    return number(value, where, f"{list_path}[{index}].{key}")


def text_at(
    item: Mapping[str, Any], key: str, where: str, list_path: str, index: int
) -> Optional[str]:
    """``item[key]`` as an optional string (``""`` counts as absent)."""
    value = item.get(key)
    if type(value) is str:
        return value or None
    return optional_text(item.get(key, MISSING), where, f"{list_path}[{index}].{key}")


class UniqueIps:
    """Device NIC addresses must be IP addresses, unique across the table (HCCL rejects both
    at start-up).

    ``""`` and ``"-1"`` (device plugin could not read the address) are not addresses and are
    not compared; a comma-separated value lists several NICs of one device.
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.seen: Dict[str, Tuple[str, int]] = {}  # address -> (device list path, index)

    def add(self, ip: Optional[str], list_path: str, index: int) -> None:
        if not ip or ip == "-1":
            return
        for part in ip.split(",") if "," in ip else (ip,):
            address = part.strip().lower()
            if not is_ip(address):
                what = f"{_short(part)} is not an IP address"
                fail(self.where, f"{list_path}[{index}].device_ip", what)
            if address in self.seen:
                other_list, other_index = self.seen[address]
                what = (
                    f"duplicate device ip {shown(part)} "
                    f"(also {other_list}[{other_index}].device_ip)"
                )
                fail(self.where, f"{list_path}[{index}].device_ip", what)
            self.seen[address] = (list_path, index)
