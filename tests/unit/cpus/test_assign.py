"""The modes of ``--cpu-bind`` as pure functions: even, LIST, numa."""

from __future__ import annotations

from typing import FrozenSet

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.cpus import assign
from malaunch.cpus.cpulist import parse_cpu_bind, parse_cpulist
from malaunch.cpus.machine import Accelerator, Machine
from malaunch.errors import UsageError

PROPERTY = settings(max_examples=300, deadline=None, database=None, derandomize=True)


def cpus(text: str) -> FrozenSet[int]:
    return parse_cpulist(text)


def test_even_is_the_model_zoos_split() -> None:
    # 192 CPUs, 8 devices: avg = 24, device i gets i*24 .. i*24+23.
    result = assign.even(cpus("0-191"), 8)
    assert result.cpus == tuple(cpus(f"{24 * i}-{24 * i + 23}") for i in range(8))
    assert result.warnings == ()


def test_even_gives_the_remainder_to_the_first_processes() -> None:
    result = assign.even(cpus("0-9"), 3)
    assert result.cpus == (cpus("0-3"), cpus("4-6"), cpus("7-9"))


def test_even_follows_a_cpuset_with_holes() -> None:
    result = assign.even(cpus("2-3,8-11"), 2)
    assert result.cpus == (cpus("2-3,8"), cpus("9-11"))


@PROPERTY
@given(st.frozensets(st.integers(0, 500), min_size=1, max_size=64), st.integers(1, 100))
def test_even_uses_every_cpu_in_order(allowed: FrozenSet[int], count: int) -> None:
    result = assign.even(allowed, count)
    assert len(result.cpus) == count
    assert all(chosen <= allowed and chosen for chosen in result.cpus)
    if count <= len(allowed):
        # Disjoint, contiguous in the launcher's CPU order, everything used, sizes within one.
        flat = [cpu for chosen in result.cpus for cpu in sorted(chosen)]
        assert flat == sorted(allowed)
        sizes = [len(chosen) for chosen in result.cpus]
        assert max(sizes) - min(sizes) <= 1
        assert result.warnings == ()
    else:
        ordered = sorted(allowed)
        assert result.cpus == tuple(frozenset({ordered[i % len(ordered)]}) for i in range(count))
        assert len(result.warnings) == 1


def test_a_list_is_taken_as_given_and_checked() -> None:
    mode = parse_cpu_bind("0-23:48-71,24-47:72-95,96", "--cpu-bind")
    result = assign.from_list(mode, cpus("0-191"), 2, "--cpu-bind '...'")
    assert result.cpus == (cpus("0-23,48-71"), cpus("24-47,72-95"))
    with pytest.raises(UsageError) as info:
        assign.from_list(mode, cpus("0-95"), 2, "--cpu-bind '...'")
    assert str(info.value) == (
        "--cpu-bind '...': CPU list 3 names CPU 96, which this launcher may not use "
        "(its CPUs: 0-95)"
    )
    with pytest.raises(UsageError, match="3 CPU lists for 4 local processes"):
        assign.from_list(mode, cpus("0-191"), 4, "--cpu-bind '...'")


def test_a_huge_range_is_checked_without_expanding_it() -> None:
    mode = parse_cpu_bind("0-65535", "--cpu-bind")
    with pytest.raises(UsageError, match="names CPU 2,"):
        assign.check_lists(mode, cpus("0-1"), "--cpu-bind '0-65535'")


DGX_NODES = tuple(
    (n, cpus(f"{16 * n}-{16 * n + 15},{128 + 16 * n}-{128 + 16 * n + 15}")) for n in range(8)
)
DGX_GPUS = tuple(
    Accelerator(f"0000:{bus}:00.0", node)
    for bus, node in (
        ("07", 3),
        ("0f", 3),
        ("47", 1),
        ("4e", 1),
        ("87", 7),
        ("90", 7),
        ("b7", 5),
        ("bd", 5),
    )
)


def test_numa_puts_each_rank_on_its_gpus_node() -> None:
    machine = Machine(cpus("0-255"), DGX_NODES, gpus=DGX_GPUS)
    result = assign.numa(machine, [0, 2, 4, 6], {})
    assert result.cpus == (DGX_NODES[3][1], DGX_NODES[1][1], DGX_NODES[7][1], DGX_NODES[5][1])
    assert result.warnings == ()


def test_numa_without_devices_goes_round_robin_quietly() -> None:
    machine = Machine(cpus("0-255"), DGX_NODES)
    result = assign.numa(machine, [0, 1, None, 3, 4, 5, 6, 7, 8], {})
    assert result.cpus == tuple(DGX_NODES[i % 8][1] for i in range(9))
    assert result.warnings == ()
    assert "no NVIDIA GPU or Ascend NPU found" in result.source


def test_numa_with_an_unknown_gpu_node_warns_and_goes_round_robin() -> None:
    gpus = (*DGX_GPUS[:7], Accelerator("0000:bd:00.0", -1))
    machine = Machine(cpus("0-255"), DGX_NODES, gpus=gpus)
    result = assign.numa(machine, list(range(8)), {})
    assert result.cpus == tuple(DGX_NODES[i][1] for i in range(8))
    assert result.warnings == (
        "no device locality: device 7 has no known NUMA node or CPU affinity",
    )


def test_numa_prefers_npu_smi_for_ascend() -> None:
    nodes = tuple((n, cpus(f"{24 * n}-{24 * n + 23}")) for n in range(8))
    npus = (Accelerator("0000:01:00.0", 0), Accelerator("0000:c1:00.0", 6))
    machine = Machine(cpus("0-191"), nodes, npus=npus)
    result = assign.numa(machine, [0, 1], {0: cpus("144-167"), 1: cpus("0-23")})
    assert result.cpus == (cpus("144-167"), cpus("0-23"))
    assert "npu-smi" in result.source
    result = assign.numa(machine, [0, 1], {})
    assert result.cpus == (cpus("0-23"), cpus("144-167"))
    assert len(result.warnings) == 1


def test_numa_without_any_node_binds_to_the_launchers_cpus() -> None:
    result = assign.numa(Machine(cpus("0-3")), [None, None], {})
    assert result.cpus == (cpus("0-3"), cpus("0-3"))
