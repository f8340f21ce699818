"""What ``--cpu-bind`` reads about this machine: the launcher's CPUs, NUMA nodes, accelerators.

Everything is read under a root directory, ``/`` unless ``--sysfs-root`` (``MALAUNCH_SYSFS_ROOT``)
names another, so that tests describe a 2-socket, 8-device server with a folder of files:

- the CPUs this launcher may use: its own affinity (``os.sched_getaffinity(0)``, which a
  container's cpuset already narrows); under another root, ``proc/self/status``'s
  ``Cpus_allowed_list`` when the folder has that file;
- NUMA nodes: ``sys/devices/system/node/node<N>/cpulist``;
- accelerators: ``sys/bus/pci/devices/<address>/{vendor,device,class,numa_node}``, NVIDIA GPUs
  (vendor ``0x10de``, class VGA or 3D controller, so not NVSwitches) and Ascend NPUs (Huawei,
  vendor ``0x19e5``, device ids of the 310, 310P, 910, 910B and 910 A3 chips, not Huawei's
  network cards), each kind in PCI address order.

Files go through the one bounded reader (:func:`malaunch.files.read_regular`). A file that is
absent means the machine does not say (no NUMA, no such device); one that does not parse is a
problem, returned as text for the caller's one warning, never an exception.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

from malaunch.cpus.cpulist import parse_cpulist
from malaunch.files import read_regular

SYSFS_LIMIT = 1 << 16  # a cpulist of 8192 CPUs is a few kB; sysfs reports 4096 as a size
NVIDIA = "0x10de"
HUAWEI = "0x19e5"
# Huawei's PCI device ids of Ascend chips (the driver's collection script greps lspci for these).
ASCEND_DEVICES = ("0xd100", "0xd500", "0xd801", "0xd802", "0xd803")
GPU_CLASSES = ("0x0300", "0x0302")  # VGA controller, 3D controller; an NVSwitch is 0x0680
NODE_NAME = re.compile(r"node(\d{1,5})")

Nodes = Tuple[Tuple[int, FrozenSet[int]], ...]


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """One GPU or NPU seen in sysfs."""

    address: str  # PCI address, 0000:07:00.0
    numa_node: int  # -1: the kernel does not know


@dataclasses.dataclass(frozen=True)
class Machine:
    """What the modes choose CPUs from."""

    allowed: FrozenSet[int]
    nodes: Nodes = ()  # NUMA node id -> its CPUs; () when the machine does not say
    gpus: Tuple[Accelerator, ...] = ()
    npus: Tuple[Accelerator, ...] = ()
    problems: Tuple[str, ...] = ()  # what did not parse, for one warning


def is_real_root(root: str) -> bool:
    """Whether ``root`` is this machine's own ``/``."""
    return os.path.realpath(root) == os.path.realpath("/")


def _read(path: Path) -> str:
    return read_regular(path, SYSFS_LIMIT).decode("ascii", errors="replace").strip()


def _problem(path: Path, exc: Exception) -> str:
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"{path}: {why}"


def read_allowed(root: str) -> Tuple[FrozenSet[int], List[str]]:
    """The CPUs this launcher may use, and what did not parse on the way."""
    real = frozenset(os.sched_getaffinity(0))
    if is_real_root(root):
        return real, []
    status = Path(root) / "proc" / "self" / "status"
    try:
        text = read_regular(status, SYSFS_LIMIT).decode("ascii", errors="replace")
    except FileNotFoundError:
        return real, []
    except OSError as exc:
        return real, [_problem(status, exc)]
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "Cpus_allowed_list":
            try:
                cpus = parse_cpulist(value)
            except ValueError as exc:
                return real, [_problem(status, exc)]
            if cpus:
                return cpus, []
    return real, [f"{status}: no Cpus_allowed_list line"]


def read_nodes(root: str) -> Tuple[Nodes, List[str]]:
    """NUMA node id -> CPUs (memory-only nodes have none); () if the machine does not say."""
    folder = Path(root) / "sys" / "devices" / "system" / "node"
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return (), []
    except OSError as exc:
        return (), [_problem(folder, exc)]
    nodes: Dict[int, FrozenSet[int]] = {}
    for name in names:
        match = NODE_NAME.fullmatch(name)
        if match is None:
            continue
        path = folder / name / "cpulist"
        try:
            nodes[int(match.group(1))] = parse_cpulist(_read(path))
        except (OSError, ValueError) as exc:
            return (), [_problem(path, exc)]
    return tuple(sorted(nodes.items())), []


def _device(folder: Path) -> Optional[Tuple[str, int]]:
    """(kind, NUMA node) of an NVIDIA GPU or Ascend NPU; None for any other device.

    :raises OSError, ValueError: a file of a GPU or NPU is missing or does not parse.
    """
    try:
        vendor = _read(folder / "vendor").lower()
    except FileNotFoundError:
        return None
    if vendor == NVIDIA:
        if _read(folder / "class").lower()[:6] not in GPU_CLASSES:
            return None
        kind = "gpu"
    elif vendor == HUAWEI and _read(folder / "device").lower() in ASCEND_DEVICES:
        kind = "npu"
    else:
        return None
    text = _read(folder / "numa_node")
    number = text[1:] if text.startswith("-") else text
    if not (number.isascii() and number.isdigit() and len(number) <= 5):
        msg = f"numa_node {text!r} is not a number"
        raise ValueError(msg)
    return kind, int(text)


def read_accelerators(
    root: str,
) -> Tuple[Tuple[Accelerator, ...], Tuple[Accelerator, ...], List[str]]:
    """(NVIDIA GPUs, Ascend NPUs, problems), each kind in PCI address order."""
    folder = Path(root) / "sys" / "bus" / "pci" / "devices"
    try:
        addresses = sorted(os.listdir(folder))
    except FileNotFoundError:
        return (), (), []
    except OSError as exc:
        return (), (), [_problem(folder, exc)]
    found: Dict[str, List[Accelerator]] = {"gpu": [], "npu": []}
    problems = []
    for address in addresses:
        try:
            device = _device(folder / address)
        except (OSError, ValueError) as exc:
            problems.append(_problem(folder / address, exc))
            continue
        if device is not None:
            found[device[0]].append(Accelerator(address, device[1]))
    if problems:  # a device left out would shift the numbers of the ones after it
        return (), (), problems
    return tuple(found["gpu"]), tuple(found["npu"]), problems


def read_machine(root: str, devices: bool) -> Machine:
    """The launcher's CPUs and, with ``devices``, NUMA nodes and accelerators (``numa``)."""
    allowed, problems = read_allowed(root)
    if not devices:
        return Machine(allowed, problems=tuple(problems))
    nodes, node_problems = read_nodes(root)
    gpus, npus, device_problems = read_accelerators(root)
    problems += node_problems + device_problems
    return Machine(allowed, nodes, gpus, npus, tuple(problems))
