"""CPU lists: the kernel's text form (``0-23,48-71``) and ``--cpu-bind``'s value.

The kernel writes a set of CPUs as comma-separated numbers and ranges: sysfs ``cpulist`` files,
``Cpus_allowed_list`` in ``/proc/self/status``, ``taskset -c`` and npu-smi's CPU affinity
column all use it. ``--cpu-bind`` takes ``none``, ``even``, ``numa`` or one such set per local
process: processes are separated by ``,`` (as the Ascend model zoo's scripts list them), so the
ranges of one process are joined by ``:`` (``0-23:48-71,24-47:72-95``).

Sets are kept as sorted, merged intervals until they are needed as numbers: ``0-65535`` costs
what ``0-1`` costs, and a list is checked against the launcher's CPUs before it is expanded.
"""

from __future__ import annotations

import dataclasses
from typing import FrozenSet, Iterable, List, Tuple

from malaunch.errors import UsageError
from malaunch.numbers import MAX_LOCAL_PROCESSES, is_plain_int
from malaunch.wording import quoted, spans

# Linux builds with at most 8192 CPUs (NR_CPUS); a larger number is a typo, not a machine.
MAX_CPU = 65535
MODES = ("none", "even", "numa")
EXPECTED = (
    "expected none, even, numa, or a CPU list per local process such as 0-23,24-47 "
    "(0-23:48-71 joins ranges)"
)

Intervals = Tuple[Tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class CpuBindMode:
    """A parsed ``--cpu-bind``: a mode name, or ``list`` with one interval set per process."""

    name: str
    lists: Tuple[Intervals, ...] = ()


def _interval(item: str) -> Tuple[int, int]:
    """``5`` or ``0-23``; ValueError saying what is wrong."""
    low, sep, high = item.partition("-")
    if not (is_plain_int(low) and (not sep or is_plain_int(high))):
        msg = f"{quoted(item, 30, 30)} is not a CPU number or range"
        raise ValueError(msg)
    first, last = int(low), int(high) if sep else int(low)
    if last > MAX_CPU:
        msg = f"CPU {last} is above the largest CPU number, {MAX_CPU}"
        raise ValueError(msg)
    if last < first:
        msg = f"range {item} ends before it starts"
        raise ValueError(msg)
    return first, last


def merge(intervals: Iterable[Tuple[int, int]]) -> Intervals:
    """Sorted intervals with overlapping and adjacent ones joined."""
    merged: List[Tuple[int, int]] = []
    for first, last in sorted(intervals):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return tuple(merged)


def expand(intervals: Intervals) -> FrozenSet[int]:
    """The CPU numbers of merged intervals."""
    return frozenset(cpu for first, last in intervals for cpu in range(first, last + 1))


def parse_cpulist(text: str) -> FrozenSet[int]:
    """The kernel's CPU list (``0-23,48-71``; empty: no CPU) as a set; ValueError otherwise.

    Surrounding whitespace (the newline a sysfs file ends with) is ignored.
    """
    stripped = text.strip()
    if not stripped:
        return frozenset()
    return expand(merge(_interval(item) for item in stripped.split(",")))


def format_cpulist(cpus: Iterable[int]) -> str:
    """The kernel's shortest text for a set of CPUs: ``0-23,48-71``, runs folded as every
    message folds ranks (:func:`malaunch.wording.spans`)."""
    return spans(cpus)


def parse_cpu_bind(text: str, option: str) -> CpuBindMode:
    """``none``, ``even``, ``numa`` or per-process CPU lists; UsageError starting with
    ``option`` (``--cpu-bind`` or ``MALAUNCH_CPU_BIND``) otherwise.

    Only the form is checked here; which CPUs the launcher may use, and how many processes it
    starts, are known when the plan is bound (:mod:`malaunch.cpus.bind`).
    """
    if text in MODES:
        return CpuBindMode(text)
    entries = text.split(",")
    if not text[:1].isdigit():
        msg = f"{option} {quoted(text)}: {EXPECTED}"
        raise UsageError(msg)
    if len(entries) > MAX_LOCAL_PROCESSES:
        msg = f"{option} {quoted(text)}: more than {MAX_LOCAL_PROCESSES} CPU lists"
        raise UsageError(msg)
    lists = []
    for number, entry in enumerate(entries, start=1):
        try:
            lists.append(merge(_interval(item) for item in entry.split(":")))
        except ValueError as exc:
            msg = f"{option} {quoted(text)}: CPU list {number}: {exc}; {EXPECTED}"
            raise UsageError(msg) from exc
    return CpuBindMode("list", tuple(lists))
