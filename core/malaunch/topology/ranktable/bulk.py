"""The common case of a rank table, checked with whole-list operations.

A 1024-server table has 8192 devices; checking them one by one in Python costs more than the
rest of a launch's start-up. Nearly every table is what the producers write: objects with
digit-string ids and one distinct IPv4 address each. The parsers first read the device lists
with list operations that run in C and check uniqueness once for the whole table; anything
else (integers, a missing key, empty, "-1", spaced or comma-separated addresses, IPv6, no
address at all, any duplicate) raises :class:`NotCommon`, and the parser reads the table again
one device at a time, which accepts every valid spelling and names the JSON path of what is
wrong.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Sequence

from malaunch.topology.envparse import IPV4

# One IPv4 address per line: the whole table's addresses are checked in one match, in C.
# Anything else (IPv6 too) goes to the careful pass.
_IPV4_LINES = re.compile(rf"{IPV4}(?:\n{IPV4})*", re.ASCII)


class NotCommon(Exception):
    """The bulk pass does not cover this table: parse it again one device at a time."""


def numbers(devices: Sequence[Any], key: str) -> List[int]:
    """``device[key]`` of every device, when all are strings of ASCII digits."""
    try:
        raw = [device[key] for device in devices]
        joined = "".join(raw)  # TypeError unless every value is a string
    except (TypeError, KeyError) as exc:
        raise NotCommon from exc
    # all(raw): no empty string hides between the digits of the others.
    # max(map(len)): int() of a 5,000-digit id would raise past the interpreter's limit.
    if not (all(raw) and joined.isdigit() and joined.isascii()) or max(map(len, raw)) > 18:
        raise NotCommon
    return list(map(int, raw))


def addresses(devices: Sequence[Any]) -> List[str]:
    """Every ``device_ip``, when each is one IPv4 address."""
    try:
        raw = [device.get("device_ip") for device in devices]
        joined = "".join(raw)  # TypeError when one is absent (None) or not a string
    except (TypeError, AttributeError) as exc:
        raise NotCommon from exc
    # No newline inside a value, so that one line of the match is one whole value.
    if "\n" in joined or not _IPV4_LINES.fullmatch("\n".join(raw)):
        raise NotCommon
    return raw


class Collected:
    """Device ids per node and every address of the table, checked for duplicates at the end."""

    def __init__(self) -> None:
        self.addresses: List[str] = []
        self.node_ids: Dict[str, List[int]] = {}

    def add(self, node: str, ids: List[int], addresses: List[str]) -> None:
        self.addresses.extend(addresses)
        self.node_ids.setdefault(node, []).extend(ids)

    def check(self) -> None:
        """Raise :class:`NotCommon` on a duplicate (the careful pass then names it)."""
        lowered = list(map(str.lower, self.addresses))
        if len(set(lowered)) != len(lowered):
            raise NotCommon
        if any(len(set(ids)) != len(ids) for ids in self.node_ids.values()):
            raise NotCommon
