"""Small parsers for platform variables, shared by the topology sources.

Every function takes the variable's value (or the env mapping) plus a label naming where the
value came from (a variable or a file), so an error message can name the culprit.
"""

from __future__ import annotations

import ipaddress
import re
from typing import List, Mapping, Optional, Tuple

from malaunch.errors import TopologyError
from malaunch.numbers import MAX_LOCAL_PROCESSES, MAX_NODES, is_plain_int, parse_int
from malaunch.wording import plural

_QUOTES = ("'", '"')
_PORT_RANGE = (1, 65535)
# RFC 1123 host names (underscores allowed: some internal DNS uses them), 253 characters at
# most: anything else (``$(id)``, spaces, control characters) never becomes an address.
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?", re.ASCII)
_DOTTED_NUMBERS = re.compile(r"[0-9.]+", re.ASCII)
# Dotted-quad IPv4 as ipaddress reads it (no leading zeros), several times faster than
# ipaddress.IPv4Address: a rank table holds thousands of addresses.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
IPV4 = rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}"
_IPV4 = re.compile(IPV4, re.ASCII)
# ``ipaddress`` takes any text after "%" as an IPv6 zone; a real one is an interface name or
# number, so "$(id)", spaces and control characters never ride along with an address.
_ZONE = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)
DEFAULT_MAXIMUM = 10**9  # no count or index of a real job comes near this


def get(env: Mapping[str, str], name: str) -> Optional[str]:
    """The stripped value of ``name``, or None when it is unset or blank."""
    value = env.get(name, "").strip()
    return value or None


def read_int(
    env: Mapping[str, str],
    name: str,
    *,
    minimum: int = 0,
    maximum: int = DEFAULT_MAXIMUM,
    default: Optional[int] = None,
) -> Optional[int]:
    """An integer variable in ``[minimum, maximum]`` (``default`` when unset or blank), in
    ASCII digits only (see :mod:`malaunch.numbers`)."""
    raw = get(env, name)
    if raw is None:
        return default
    return parse_int(raw, f'{name}="{env[name]}"', minimum=minimum, maximum=maximum)


def parse_port(text: str, what: str) -> int:
    """A TCP port 1-65535; ``what`` is the start of the error message."""
    low, high = _PORT_RANGE
    if not is_plain_int(text) or not low <= int(text) <= high:
        msg = f"{what}: port {text!r} is not a number in {low}-{high}"
        raise TopologyError(msg)
    return int(text)


def read_port(env: Mapping[str, str], name: str) -> Optional[int]:
    """A port variable, or None when unset or blank."""
    raw = get(env, name)
    return None if raw is None else parse_port(raw, f'{name}="{env[name]}"')


def _strip_quotes(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
        return text[1:-1].strip()
    return text


def _closing_bracket(text: str) -> int:
    """Position of the ``]`` that closes the ``[`` at position 0, or -1."""
    depth = 0
    for pos, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return pos
    return -1


def split_items(value: str, what: str) -> List[str]:
    """Split a comma list that may be wrapped in ``[...]`` and quoted, with spaces.

    ``[a:1, 'b:2']``, ``"a:1,b:2"`` and ``a:1,b:2`` give the same items. The outer brackets are
    removed only when they enclose the whole value, so ``[2001:db8::1]:2222,...`` keeps its
    IPv6 brackets.
    """
    text = _strip_quotes(value)
    if text.startswith("[") and _closing_bracket(text) == len(text) - 1:
        text = text[1:-1]
    if not text.strip():
        msg = f"{what} is empty: expected a comma-separated list"
        raise TopologyError(msg)
    items = [_strip_quotes(item) for item in text.split(",")]
    for number, item in enumerate(items, start=1):
        if not item:
            msg = f'{what} item {number} is empty in "{value}"'
            raise TopologyError(msg)
    return items


def is_host(host: str) -> bool:
    """A host name (RFC 1123), an IPv4 address, or an IPv6 address without brackets."""
    if ":" in host:
        return _ipv6_problem(host) is None
    if _DOTTED_NUMBERS.fullmatch(host):  # all digits and dots: it must be a real IPv4 address
        return _IPV4.fullmatch(host) is not None
    return len(host) <= 253 and _HOSTNAME.fullmatch(host) is not None


def check_host(host: str, where: str) -> str:
    """``host`` if :func:`is_host`; ``where`` starts the error message."""
    if not is_host(host):
        msg = f"{where}: {host!r} is not a host name or address"
        raise TopologyError(msg)
    return host


def split_host_port(item: str, where: str) -> Tuple[str, int]:
    """``host:port`` or ``[ipv6]:port`` -> (host, port); ``where`` starts the error message."""
    if item.startswith("["):
        end = item.find("]")
        host, rest = item[1:end], item[end + 1 :]
        if end < 0 or not rest.startswith(":"):
            msg = f"{where}: expected [address]:port"
            raise TopologyError(msg)
        _check_ipv6(host, where)
        return host, parse_port(rest[1:], where)
    if item.count(":") > 1:
        msg = f"{where}: an IPv6 address must be written in brackets, [address]:port"
        raise TopologyError(msg)
    host, sep, port = item.partition(":")
    if not sep:
        msg = f"{where}: expected host:port"
        raise TopologyError(msg)
    return check_host(host, where), parse_port(port, where)


def _ipv6_problem(host: str) -> Optional[str]:
    """Why ``host`` is not an IPv6 address (without brackets), or None when it is one."""
    try:
        zone = ipaddress.IPv6Address(host).scope_id
    except ValueError:
        return "is not an IPv6 address"
    if zone is not None and not _ZONE.fullmatch(zone):
        return "is not an IPv6 address (a zone after % holds only letters, digits, _ . -)"
    return None


def _check_ipv6(host: str, where: str) -> None:
    problem = _ipv6_problem(host)
    if problem is not None:
        msg = f"{where}: {host!r} {problem}"
        raise TopologyError(msg)


def is_ip(text: str) -> bool:
    """An IPv4 address, or an IPv6 address without brackets (its zone checked as above)."""
    if ":" in text:
        return _ipv6_problem(text) is None
    return _IPV4.fullmatch(text) is not None


def format_host_port(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_host_ports(value: str, what: str) -> List[Tuple[str, int]]:
    """A ``host:port`` comma list (see :func:`split_items`)."""
    items = split_items(value, what)
    return [
        split_host_port(item, f'{what} item {number} "{item}"')
        for number, item in enumerate(items, start=1)
    ]


def parse_host(item: str, where: str) -> str:
    """A bare host: a name, an IPv4 address, or an IPv6 address with or without brackets."""
    if item.startswith("[") and item.endswith("]"):
        _check_ipv6(item[1:-1], where)
        return item[1:-1]
    if item.count(":") > 1:
        _check_ipv6(item, where)
        return item
    if ":" in item:
        msg = f"{where}: expected a host name or address without a port"
        raise TopologyError(msg)
    return check_host(item, where)


def parse_hosts(value: str, what: str) -> List[str]:
    """A comma list of hosts (see :func:`split_items`)."""
    items = split_items(value, what)
    return [
        parse_host(item, f'{what} item {number} "{item}"')
        for number, item in enumerate(items, start=1)
    ]


def check_host_count(env: Mapping[str, str], name: str, label: str, count: int) -> None:
    """A declared count (``MA_NUM_HOSTS``, ``SLURM_NNODES``, ...) must match the host list."""
    declared = read_int(env, name, minimum=1, maximum=MAX_NODES)
    if declared is not None and declared != count:
        msg = f"{name}={declared} does not match {label}, which lists {plural(count, 'host')}"
        raise TopologyError(msg)


def node_index(env: Mapping[str, str], name: str, label: str, count: int) -> int:
    """This node's position in a host list, from ``name`` (``VC_TASK_INDEX``, ``SLURM_NODEID``);
    it may be left out only when the list has one host."""
    index = read_int(env, name, maximum=MAX_NODES)
    if index is None:
        if count == 1:
            return 0
        state = "is empty" if name in env else "is not set"
        hosts = plural(count, "host")
        msg = f"{name} {state} and {label} lists {hosts}: cannot tell which node this is"
        raise TopologyError(msg)
    if index >= count:
        msg = f"{name}={index} is out of range for {label} ({plural(count, 'host')})"
        raise TopologyError(msg)
    return index


def job_id(env: Mapping[str, str]) -> Optional[str]:
    """The platform's job id: ModelArts' ``MA_VJ_NAME`` with ``ma-job`` -> ``modelarts-job``
    (how ModelArts' own bootstrap names the job and its log files), else the legacy
    ``BATCH_JOB_ID``."""
    name = get(env, "MA_VJ_NAME")
    if name is None:
        return get(env, "BATCH_JOB_ID")
    return "modelarts-job" + name[len("ma-job") :] if name.startswith("ma-job") else name


def job_name_from_host(host: str, task: str, index: int) -> Optional[str]:
    """The job name in a ``<job>-<task>-<index>[.<domain>]`` host (Volcano, Kubeflow), if any.

    The suffix is matched exactly, never as a prefix, so ``worker-1`` is not ``worker-10``.
    """
    label = host.split(".", 1)[0]
    suffix = f"-{task}-{index}"
    if label.endswith(suffix) and len(label) > len(suffix):
        return label[: -len(suffix)]
    return None


# Ascend's runtime reads its list up to the first bad entry and silently drops the rest, so a
# typo would quietly shrink the job: refuse anything but plain ascending ids there.
VISIBLE_DEVICE_VARS = ("ASCEND_RT_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
_CUDA_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z/-]+$")


def visible_devices(env: Mapping[str, str]) -> Optional[Tuple[str, Tuple[int, ...]]]:
    """(variable, physical ids) of the first non-empty visible-devices list, or None.

    ``CUDA_VISIBLE_DEVICES`` may instead hold GPU/MIG UUIDs; those count as devices whose id
    is their position. An empty value (CUDA's "no GPU") counts as no list.
    """
    for name in VISIBLE_DEVICE_VARS:
        value = env.get(name, "")
        if value == "":
            continue
        return name, _device_ids(name, value)
    return None


def _device_ids(name: str, value: str) -> Tuple[int, ...]:
    items = value.split(",")
    if name == "CUDA_VISIBLE_DEVICES" and all(_CUDA_UUID.match(item) for item in items):
        return tuple(range(len(items)))
    if len(items) > MAX_LOCAL_PROCESSES:
        msg = f"{name} lists {len(items)} devices; at most {MAX_LOCAL_PROCESSES} per node"
        raise TopologyError(msg)
    ids: List[int] = []
    for number, item in enumerate(items, start=1):
        if not is_plain_int(item):
            msg = (
                f'{name}="{value}": item {number} "{item}" is not a device id '
                "(expected ascending integers without spaces, e.g. 0,1,2,3)"
            )
            raise TopologyError(msg)
        ids.append(int(item))
    if len(set(ids)) != len(ids):
        msg = f'{name}="{value}": a device id is listed twice'
        raise TopologyError(msg)
    if name == "ASCEND_RT_VISIBLE_DEVICES" and ids != sorted(ids):
        msg = f'{name}="{value}": device ids must be in ascending order'
        raise TopologyError(msg)
    return tuple(ids)


def device_ids(env: Mapping[str, str], nproc: Optional[int], nproc_origin: str) -> Tuple[int, ...]:
    """Physical device ids of this node's process slots.

    ``nproc`` is the requested number of processes (None: one per visible device, else 1) and
    ``nproc_origin`` names where it came from, for the error when more processes are asked
    for than devices are visible.
    """
    visible = visible_devices(env)
    if visible is None:
        return tuple(range(nproc or 1))
    name, ids = visible
    if nproc is None:
        return ids
    if nproc > len(ids):
        asks = plural(nproc, "process")
        msg = f"{nproc_origin} asks for {asks} per node but {name} lists {len(ids)}"
        raise TopologyError(msg)
    return ids[:nproc]
