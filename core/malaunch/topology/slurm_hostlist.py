"""Slurm's compressed host lists and run-length counts, without ``scontrol show hostnames``.

Host lists: ``node[01-04,07]`` (ranges keep the zero-padding width of their lower bound),
several bracket groups in one name (``rack[1-2]-node[01-02]``, expanded left to right),
several names separated by commas outside brackets or by whitespace (``a[1-2],b3``).
Counts: ``8(x5)`` or ``2(x3),1`` (SLURM_TASKS_PER_NODE and friends).
"""

from __future__ import annotations

import itertools
import re
from typing import List, Tuple, Union

from malaunch.errors import TopologyError
from malaunch.numbers import MAX_LOCAL_PROCESSES, MAX_NODES

# A typo such as node[1-100000000] must not exhaust memory before the count check runs.
MAX_HOSTS = MAX_NODES
# ASCII digits only (``\d`` would take other scripts' digits), at most 18 of them.
_RANGE = re.compile(r"^([0-9]{1,18})(?:-([0-9]{1,18}))?$")
_COUNT = re.compile(r"^([0-9]{1,18})(?:\(x([0-9]{1,18})\))?$")


def _fail(what: str, text: str, problem: str) -> TopologyError:
    return TopologyError(f'{what}="{text}": {problem}')


def _top_level_items(text: str, what: str) -> List[str]:
    """Split at commas outside brackets, then at whitespace; no item may be empty."""
    pieces: List[str] = []
    depth, start = 0, 0
    for pos, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            pieces.append(text[start:pos])
            start = pos + 1
    pieces.append(text[start:])
    items: List[str] = []
    for number, piece in enumerate(pieces, start=1):
        words = piece.split()
        if not words:
            raise _fail(what, text, f"item {number} is empty")
        items.extend(words)
    return items


# One bracket group as ranges (low, high, zero-padding width), counted before any is expanded.
Ranges = List[Tuple[int, int, int]]


def _group_ranges(group: str, what: str, text: str) -> Ranges:
    """``01-04,07`` -> [(1, 4, 2), (7, 7, 2)], at most :data:`MAX_HOSTS` values in all."""
    ranges: Ranges = []
    count = 0
    for part in group.split(","):
        match = _RANGE.match(part)
        if match is None:
            raise _fail(what, text, f'"[{group}]": "{part}" is not a number or a range N-M')
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low):
            raise _fail(what, text, f'"[{group}]": range "{part}" goes backwards')
        count += int(high) - int(low) + 1
        if count > MAX_HOSTS:
            raise _fail(what, text, f'"[{group}]": expands to more than {MAX_HOSTS} hosts')
        ranges.append((int(low), int(high), len(low)))
    return ranges


def _group_size(ranges: Ranges) -> int:
    return sum(high - low + 1 for low, high, _width in ranges)


def _group_values(ranges: Ranges) -> List[str]:
    """The values of a group, each range keeping the zero-padding width of its lower bound."""
    return [str(n).zfill(width) for low, high, width in ranges for n in range(low, high + 1)]


def _split_item(item: str, what: str, text: str) -> List[Union[str, Ranges]]:
    """A name as its segments: literal text, or a bracket group's ranges."""
    segments: List[Union[str, Ranges]] = []
    pos = 0
    while pos < len(item):
        open_at = item.find("[", pos)
        close_at = item.find("]", pos)
        if open_at < 0:
            if close_at >= 0:
                raise _fail(what, text, f'"{item}": "]" without "["')
            segments.append(item[pos:])
            break
        if 0 <= close_at < open_at:
            raise _fail(what, text, f'"{item}": "]" without "["')
        if open_at > pos:
            segments.append(item[pos:open_at])
        end = item.find("]", open_at)
        if end < 0 or "[" in item[open_at + 1 : end]:
            raise _fail(what, text, f'"{item}": "[" without a matching "]"')
        segments.append(_group_ranges(item[open_at + 1 : end], what, text))
        pos = end + 1
    return segments


def expand_hostlist(text: str, what: str = "hostlist") -> List[str]:
    """The host names of a Slurm host list, in order; ``what`` names the variable in errors."""
    if not text.strip():
        raise _fail(what, text, "empty host list")
    hosts: List[str] = []
    for item in _top_level_items(text, what):
        segments = _split_item(item, what, text)
        # Every group is bounded on its own, but their product is what expanding costs: count
        # it first (stopping once past the limit), so 20 groups of 99,999 allocate nothing.
        size = 1
        for segment in segments:
            size *= 1 if isinstance(segment, str) else _group_size(segment)
            if len(hosts) + size > MAX_HOSTS:
                raise _fail(what, text, f"expands to more than {MAX_HOSTS} hosts")
        options = [[s] if isinstance(s, str) else _group_values(s) for s in segments]
        hosts.extend("".join(parts) for parts in itertools.product(*options))
    return hosts


def _count_item(item: str, what: str, text: str) -> Tuple[int, int]:
    match = _COUNT.match(item.strip())
    if match is None:
        raise _fail(what, text, f'"{item}" is not N or N(xM)')
    repeat = int(match.group(2) or 1)
    if repeat < 1 or repeat > MAX_HOSTS:
        raise _fail(what, text, f'"{item}": the repeat count must be 1-{MAX_HOSTS}')
    value = int(match.group(1))
    if value > MAX_LOCAL_PROCESSES:
        raise _fail(what, text, f'"{item}": at most {MAX_LOCAL_PROCESSES} per node')
    return value, repeat


def expand_counts(text: str, what: str = "counts") -> List[int]:
    """``2(x3),1`` -> [2, 2, 2, 1]; ``what`` names the variable in errors."""
    if not text.strip():
        raise _fail(what, text, "empty count list")
    counts: List[int] = []
    for item in text.split(","):
        value, repeat = _count_item(item, what, text)
        counts.extend([value] * repeat)
        if len(counts) > MAX_HOSTS:
            raise _fail(what, text, f"expands to more than {MAX_HOSTS} entries")
    return counts
