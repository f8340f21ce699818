"""``/etc/hccn.conf``: the NPU NIC addresses of a bare-metal Ascend server (conventions §1.8).

``hccn_tool`` writes one ``key_<N>=value`` line per setting; only ``address_<N>`` matters here
(the device IP of physical NPU N). ``netmask_<N>``, ``netdetect_<N>``, ``gateway_<N>`` and any
other key are ignored, as hccl_tools.py ignores them.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Dict

from malaunch.errors import MissingInputError, TopologyError
from malaunch.files import TooLarge, read_regular
from malaunch.numbers import is_plain_int
from malaunch.wording import shortened

DEFAULT_PATH = Path("/etc/hccn.conf")
ADDRESS_PREFIX = "address_"


def parse_hccn_conf(text: str, source: str) -> Dict[int, str]:
    """Physical NPU id -> device IP from the ``address_<N>=<ip>`` lines of ``text``.

    Blank lines and ``#`` comments are skipped. A line without ``=``, an ``address_`` key whose
    suffix is not a device number, a value that is not an IP address, or a device given twice
    raises :class:`TopologyError` naming ``source`` and the line number.
    """
    addresses: Dict[int, str] = {}
    first_line: Dict[int, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source} line {number}"
        key, sep, value = line.partition("=")
        if not sep:
            raise TopologyError(f'{where}: "{shortened(line)}": expected KEY=VALUE')
        key, value = key.strip(), value.strip()
        if not key.startswith(ADDRESS_PREFIX):
            continue
        device = _device_number(key, where)
        _check_ip(key, value, where)
        if device in addresses:
            earlier = first_line[device]
            msg = f"{where}: {key}: device {device} already has an address (line {earlier})"
            raise TopologyError(msg)
        addresses[device] = value
        first_line[device] = number
    return addresses


def _device_number(key: str, where: str) -> int:
    suffix = key[len(ADDRESS_PREFIX) :]
    # ASCII digits, at most 18: isdigit() alone accepts "²" and other Unicode digits that int()
    # refuses, and int() of 5,000 digits fails past Python's conversion limit.
    if not is_plain_int(suffix):
        msg = f'{where}: "{shortened(key)}": expected address_<N> with N a device number'
        raise TopologyError(msg)
    return int(suffix)


def _check_ip(key: str, value: str, where: str) -> None:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise TopologyError(f'{where}: {key}: "{shortened(value)}" is not an IP address') from None


def read_hccn_conf(path: Path) -> Dict[int, str]:
    """:func:`parse_hccn_conf` on the file at ``path``.

    A missing or unreadable file raises :class:`MissingInputError` (66); a file past 1 MiB
    and text that is not UTF-8 raise :class:`TopologyError` (65), as a rank table does.
    """
    try:
        data = read_regular(path, 1 << 20)  # a FIFO or /dev/zero must not hang or fill memory
    except FileNotFoundError:
        raise MissingInputError(f"{path}: the file does not exist") from None
    except TooLarge as exc:  # a file, readable, just not an hccn.conf: malformed, not missing
        raise TopologyError(f"{path}: {exc.strerror}") from None
    except OSError as exc:
        raise MissingInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TopologyError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_hccn_conf(text, str(path))
