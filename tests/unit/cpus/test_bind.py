"""``CpuBinder``: which processes of a plan are bound, and what the launcher says."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, List

import pytest
from loguru import logger

from malaunch.cpus.bind import CpuBinder, CpuBindRequest
from malaunch.cpus.cpulist import parse_cpu_bind
from malaunch.errors import UsageError
from malaunch.models import LaunchPlan
from malaunch.testing import make_plan, make_ps_topology, make_topology

MACHINES = Path(__file__).resolve().parents[2] / "fixtures" / "machines"
DGX = str(MACHINES / "dgx-a100")


@pytest.fixture
def messages() -> Iterator[List[str]]:
    caught: List[str] = []
    sink = logger.add(lambda m: caught.append(f"{m.record['level'].name}: {m.record['message']}"))
    yield caught
    logger.remove(sink)


def binder(text: str, root: str = DGX) -> CpuBinder:
    return CpuBinder(CpuBindRequest(parse_cpu_bind(text, "--cpu-bind"), text, root=root))


def cpus_of(plan: LaunchPlan) -> List[object]:
    return [(spec.role, spec.rank, spec.cpus) for spec in plan.processes]


def test_mindspores_scheduler_is_not_bound() -> None:
    plan = make_plan("mindspore", make_topology(nodes=1, nproc_per_node=2), ms_mode="dynamic")
    bound = binder("even").bind(plan)
    assert cpus_of(bound) == [
        ("scheduler", None, None),
        ("worker", 0, "0-127"),
        ("worker", 1, "128-255"),
    ]


def test_tensorflow_ps_tasks_are_not_bound() -> None:
    topology = make_ps_topology(num_ps=1, num_workers=2, role="ps", index=0)
    plan = make_plan("tensorflow_ps", topology)
    assert cpus_of(binder("numa").bind(plan)) == [("ps", None, None)]


def test_none_leaves_no_cpus_even_where_a_plugin_set_some() -> None:
    plan = make_plan("torch_ddp", make_topology(nodes=1, nproc_per_node=2))
    odd = plan.model_copy(
        update={"processes": tuple(p.model_copy(update={"cpus": "0"}) for p in plan.processes)}
    )
    assert [spec.cpus for spec in binder("none").bind(odd).processes] == [None, None]
    assert binder("none").bind(plan) is plan  # nothing to do: the plan as it was


def test_a_restart_binds_again_without_saying_it_twice(messages: List[str]) -> None:
    plan = make_plan("torch_ddp", make_topology(nodes=1, nproc_per_node=3))
    once = binder("0,1", root="/")
    with pytest.raises(UsageError, match="2 CPU lists for 3 local processes"):
        once.bind(plan)
    even = binder("even", root=str(MACHINES / "two-node-gpus"))
    first, second = even.bind(plan), even.bind(plan)
    assert cpus_of(first) == cpus_of(second)
    assert [m for m in messages if m.startswith("WARNING")] == [
        "WARNING: --cpu-bind even: 3 processes for 2 CPUs (0-1): each gets one CPU, "
        "round-robin, shared with others"
    ]
    assert len([m for m in messages if m.startswith("INFO")]) == 1


def test_the_second_node_binds_its_own_devices() -> None:
    # Node 1 of a 2-node job: its ranks 8-15 hold its devices 0-7.
    plan = make_plan("torch_ddp", make_topology(nodes=2, nproc_per_node=8, node_rank=1))
    bound = binder("numa").bind(plan)
    assert [spec.rank for spec in bound.processes] == list(range(8, 16))
    assert [spec.cpus for spec in bound.processes][:3] == [
        "48-63,176-191",
        "48-63,176-191",
        "16-31,144-159",
    ]


def test_a_failing_npu_smi_and_its_fallback_are_one_warning(
    tmp_path: Path, messages: List[str]
) -> None:
    tool = tmp_path / "npu-smi"
    tool.write_text("#!/bin/sh\nexit 3\n")
    tool.chmod(0o755)
    request = CpuBindRequest(
        parse_cpu_bind("numa", "--cpu-bind"),
        "numa",
        root=str(MACHINES / "two-node-npus"),
        npu_smi=str(tool),
    )
    plan = make_plan("torch_ddp", make_topology(nodes=1, nproc_per_node=2))
    bound = CpuBinder(request).bind(plan)
    assert [spec.cpus for spec in bound.processes] == ["0", "1"]  # sysfs, PCI order
    assert [m for m in messages if m.startswith("WARNING")] == [
        "WARNING: --cpu-bind numa: cannot read npu-smi info -t topo: exit code 3; Ascend NPUs "
        "taken in PCI address order (no CPU affinity from npu-smi info -t topo), which "
        "npu-smi's numbering need not follow"
    ]
