"""Choosing each bound process's CPUs: the modes of ``--cpu-bind``, as pure functions.

Every mode chooses within ``allowed``, the CPUs the launcher itself may use, so a container's
cpuset is respected and ``sched_setaffinity`` never asks for a CPU the kernel would refuse.
Processes are counted in local order (the plan's order of its bound processes: local rank for
torch and MindSpore).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from malaunch.cpus.cpulist import CpuBindMode, Intervals, format_cpulist
from malaunch.cpus.machine import Accelerator, Machine
from malaunch.cpus.npusmi import COMMAND
from malaunch.errors import UsageError
from malaunch.wording import plural

CpuSets = Tuple[FrozenSet[int], ...]


@dataclasses.dataclass(frozen=True)
class Assignment:
    """The CPUs of each bound process, where they came from, and what to warn about."""

    cpus: CpuSets
    source: str
    warnings: Tuple[str, ...] = ()
    round_robin: bool = False  # numa without device locality


def even(allowed: FrozenSet[int], count: int) -> Assignment:
    """The Ascend model zoo's split: one contiguous range of the launcher's CPUs per process.

    With ``C`` CPUs and ``N`` processes each gets ``C // N`` (the model zoo's ``avg``), the
    first ``C % N`` one more, so that no CPU is left out. With more processes than CPUs, each
    gets one CPU, handed out round-robin and shared.
    """
    cpus = sorted(allowed)
    if count > len(cpus):
        shared = tuple(frozenset({cpus[index % len(cpus)]}) for index in range(count))
        what = f"{plural(count, 'process')} for {plural(len(cpus), 'CPU')}"
        warning = (
            f"{what} ({format_cpulist(cpus)}): each gets one CPU, round-robin, shared with others"
        )
        return Assignment(shared, "one CPU each, round-robin", (warning,))
    base, extra = divmod(len(cpus), count)
    ranges: List[FrozenSet[int]] = []
    start = 0
    for index in range(count):
        size = base + (1 if index < extra else 0)
        ranges.append(frozenset(cpus[start : start + size]))
        start += size
    return Assignment(
        tuple(ranges), f"the launcher's {plural(len(cpus), 'CPU')} in {plural(count, 'range')}"
    )


def _outside(intervals: Intervals, allowed: FrozenSet[int]) -> Optional[int]:
    """The first CPU of ``intervals`` not in ``allowed``, looking at most ``len(allowed) + 1``
    numbers per interval (a longer interval cannot fit)."""
    for first, last in intervals:
        for cpu in range(first, min(last, first + len(allowed)) + 1):
            if cpu not in allowed:
                return cpu
    return None


def check_lists(mode: CpuBindMode, allowed: FrozenSet[int], culprit: str) -> None:
    """UsageError starting with ``culprit`` (``--cpu-bind '0-3,4-7'``) when a list names a CPU
    the launcher may not use."""
    for number, intervals in enumerate(mode.lists, start=1):
        cpu = _outside(intervals, allowed)
        if cpu is not None:
            msg = (
                f"{culprit}: CPU list {number} names CPU {cpu}, which this launcher may not "
                f"use (its CPUs: {format_cpulist(allowed)})"
            )
            raise UsageError(msg)


def from_list(mode: CpuBindMode, allowed: FrozenSet[int], count: int, culprit: str) -> Assignment:
    """``--cpu-bind LIST``: the lists as given, checked (:func:`check_lists`); UsageError too
    when there are fewer lists than processes. Lists beyond the processes are left unused."""
    check_lists(mode, allowed, culprit)
    if len(mode.lists) < count:
        lists = plural(len(mode.lists), "CPU list")
        processes = plural(count, "local process")
        msg = f"{culprit}: {lists} for {processes} (one per process, in local order)"
        raise UsageError(msg)
    chosen = tuple(
        frozenset(cpu for first, last in lists for cpu in range(first, last + 1))
        for lists in mode.lists[:count]
    )
    return Assignment(chosen, "the lists given")


def _node_cpus(machine: Machine, device: Accelerator) -> Optional[FrozenSet[int]]:
    return dict(machine.nodes).get(device.numa_node)


def _locality(
    machine: Machine, npu_affinity: Mapping[int, FrozenSet[int]]
) -> Tuple[Dict[int, Optional[FrozenSet[int]]], str, str]:
    """(device id -> its CPUs or None if unknown, the source, a caveat to warn about or '')."""
    if npu_affinity and not machine.gpus:
        return dict(npu_affinity), f"the CPU Affinity of each rank's NPU ({COMMAND})", ""
    if machine.gpus:
        table = {n: _node_cpus(machine, gpu) for n, gpu in enumerate(machine.gpus)}
        source = "sysfs: the NUMA node of each rank's NVIDIA GPU, GPUs in PCI address order"
        return table, source, ""
    table = {n: _node_cpus(machine, npu) for n, npu in enumerate(machine.npus)}
    source = "sysfs: the NUMA node of each rank's Ascend NPU, NPUs in PCI address order"
    caveat = (
        f"Ascend NPUs taken in PCI address order (no CPU affinity from {COMMAND}), which "
        "npu-smi's numbering need not follow"
    )
    return table, source, caveat


def _by_device(
    machine: Machine, devices: Sequence[Optional[int]], npu_affinity: Mapping[int, FrozenSet[int]]
) -> Tuple[Optional[Assignment], str]:
    """Each process on its device's CPUs, or (None, why not)."""
    if not (npu_affinity or machine.gpus or machine.npus):
        return None, "no NVIDIA GPU or Ascend NPU found"
    table, source, caveat = _locality(machine, npu_affinity)
    chosen = []
    for local, device in enumerate(devices):
        if device is None:
            return None, f"local process {local} has no device"
        cpus = table.get(device)
        if cpus is None:
            return None, f"device {device} has no known NUMA node or CPU affinity"
        if not cpus & machine.allowed:
            return None, (
                f"device {device}'s CPUs ({format_cpulist(cpus)}) are none of the launcher's"
            )
        chosen.append(cpus & machine.allowed)
    return Assignment(tuple(chosen), source, (caveat,) if caveat else ()), ""


def numa(
    machine: Machine, devices: Sequence[Optional[int]], npu_affinity: Mapping[int, FrozenSet[int]]
) -> Assignment:
    """Each process on the CPUs of its device's NUMA node (within the launcher's CPUs).

    ``devices`` holds each process's device id (None: it has none). Without locality for
    every process (no accelerator here, an unknown node), NUMA nodes are handed out
    round-robin by local order instead, and the source says why; a machine that lists no NUMA
    node counts as one node holding every CPU the launcher may use.
    """
    by_device, why = _by_device(machine, devices, npu_affinity)
    if by_device is not None:
        return by_device
    if machine.problems:
        why = "what did not parse is left out"
    nodes = [cpus & machine.allowed for _, cpus in machine.nodes]
    usable = [cpus for cpus in nodes if cpus] or [machine.allowed]
    chosen = tuple(usable[local % len(usable)] for local in range(len(devices)))
    source = f"NUMA nodes round-robin by local rank, {len(usable)} of them ({why})"
    # A device that exists but cannot be placed is worth a warning; a CPU-only machine is not,
    # nor a tree that did not parse (the caller warns about that once).
    devices_seen = bool(machine.gpus or machine.npus or npu_affinity)
    warn = devices_seen and not machine.problems and not why.startswith("local")
    warnings = (f"no device locality: {why}",) if warn else ()
    return Assignment(chosen, source, warnings, round_robin=True)
