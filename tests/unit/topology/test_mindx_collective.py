"""The mindx-pytorch and mindx-tensorflow sources: MindX ascend-operator AscendJob pods."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from malaunch.errors import TopologyError
from malaunch.models import ResolveOptions, Topology
from malaunch.testing import read_env_file
from malaunch.topology import mindx, mindx_collective

ENV = Path(__file__).parents[2] / "fixtures" / "env"
SHARED = Path(__file__).parents[2] / "fixtures" / "shared"
OPTIONS = ResolveOptions()
TASK_ID = "6f0e58a2-2c7c-4d1e-9a7e-3b7b1f5c9d10"


def pytorch_pod(**changes: str) -> Dict[str, str]:
    env = read_env_file(ENV / "mindx_operator_pytorch_env.env")
    env.update(changes)
    return env


def tensorflow_pod(**changes: str) -> Dict[str, str]:
    env = read_env_file(ENV / "mindx_operator_tensorflow_env.env")
    env.update(changes)
    return env


def ranks(topo: Topology) -> List[List[int]]:
    return [[d.rank for d in node.devices] for node in topo.nodes]


def test_pytorch_worker_pod_rank_is_a_pod_rank_and_world_size_counts_processes() -> None:
    env = pytorch_pod()
    assert mindx_collective.detect_pytorch(env)
    topo = mindx_collective.resolve_pytorch(env, OPTIONS)
    assert topo.source == "mindx-pytorch"
    assert (topo.nnodes, topo.node_rank, topo.world_size) == (2, 1, 16)
    assert ranks(topo) == [list(range(8)), list(range(8, 16))]
    assert [d.device_id for d in topo.this_node.devices] == list(range(8, 16))
    assert [d.local_index for d in topo.this_node.devices] == list(range(8))
    assert [n.host for n in topo.nodes] == ["10.96.0.12", "mindx-node-1"]
    assert [n.role for n in topo.nodes] == ["master", "worker"]
    assert (topo.master_addr, topo.master_port) == ("10.96.0.12", 2222)
    assert topo.job_id == TASK_ID
    assert topo.peers_reachable  # the job channel dials nodes[0], the master


def test_pytorch_master_pod() -> None:
    topo = mindx_collective.resolve_pytorch(pytorch_pod(RANK="0"), OPTIONS)
    assert topo.node_rank == 0
    assert topo.this_node.host == "10.96.0.12"


def test_one_pod_job_keeps_the_job_channel() -> None:
    env = pytorch_pod(RANK="0", WORLD_SIZE="8")
    assert mindx_collective.resolve_pytorch(env, OPTIONS).peers_reachable


def test_nproc_per_node_overrides_this_pods_processes() -> None:
    topo = mindx_collective.resolve_pytorch(pytorch_pod(), ResolveOptions(nproc_per_node=2))
    assert ranks(topo) == [[0, 1], [2, 3]]
    assert [d.device_id for d in topo.this_node.devices] == [0, 1]


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("Ascend910-4,Ascend910-5", [4, 5]),
        ("5,4", [4, 5]),
        ("4-5", [0, 1]),
        ("4,4", [0, 1]),
        ("0,1,2", [0, 1]),
        ("x,y", [0, 1]),
    ],
)
def test_physical_ids(visible: str, expected: List[int]) -> None:
    env = {"ASCEND_VISIBLE_DEVICES": visible}
    assert list(mindx_collective.physical_ids(env, 2)) == expected


def test_tensorflow_worker_pod() -> None:
    env = tensorflow_pod()
    assert mindx_collective.detect_tensorflow(env)
    assert not mindx_collective.detect_pytorch(env)
    topo = mindx_collective.resolve_tensorflow(env, OPTIONS)
    assert topo.source == "mindx-tensorflow"
    assert (topo.nnodes, topo.node_rank, topo.world_size) == (3, 1, 12)
    assert [n.host for n in topo.nodes] == ["10.96.0.20", "192.0.2.52", "mindx-node-2"]
    assert (topo.master_addr, topo.master_port) == ("10.96.0.20", 2222)


def test_detection_needs_every_fact() -> None:
    assert not mindx_collective.detect_pytorch(pytorch_pod(MINDX_TASK_ID=""))
    assert not mindx_collective.detect_pytorch(pytorch_pod(LOCAL_WORLD_SIZE=""))
    assert not mindx_collective.detect_tensorflow(tensorflow_pod(CM_RANK=""))
    # Other platforms' pods are not AscendJob pods.
    for name in ("volcano_pytorch_worker.env", "kubeflow_pytorchjob_worker.env"):
        env = read_env_file(ENV / name)
        assert not mindx_collective.detect_pytorch(env)
        assert not mindx_collective.detect_tensorflow(env)
    mindspore = read_env_file(SHARED / "mindx_operator_mindspore_env.env")
    assert not mindx_collective.detect_pytorch(mindspore)
    assert not mindx.detect(pytorch_pod())


ERRORS: List[Tuple[Dict[str, str], Tuple[str, ...], str]] = [
    (
        {"WORLD_SIZE": "12"},
        (),
        "WORLD_SIZE=12 is not a multiple of LOCAL_WORLD_SIZE=8: expected NPUs per pod x NPU pods",
    ),
    (
        {"RANK": "2"},
        (),
        "RANK=2 is out of range: WORLD_SIZE=16 / LOCAL_WORLD_SIZE=8 gives 2 NPU pods",
    ),
    ({"LOCAL_WORLD_SIZE": "0"}, (), 'LOCAL_WORLD_SIZE="0": expected an integer >= 1'),
    ({"LOCAL_WORLD_SIZE": "20000"}, (), 'LOCAL_WORLD_SIZE="20000": expected at most 10000'),
    (
        {"WORLD_SIZE": "150000", "LOCAL_WORLD_SIZE": "1"},
        (),
        "WORLD_SIZE=150000 / LOCAL_WORLD_SIZE=1 gives 150000 NPU pods; at most 100000",
    ),
    ({"WORLD_SIZE": "6400000"}, (), 'WORLD_SIZE="6400000": expected at most 200000'),
    (
        {},
        ("RANK",),
        "RANK is not set: the ascend-operator sets it on every NPU pod of an AscendJob",
    ),
    (
        {},
        ("MASTER_ADDR",),
        "MASTER_ADDR is not set: the ascend-operator sets it on every NPU pod of an AscendJob",
    ),
]


@pytest.mark.parametrize(("changes", "removed", "message"), ERRORS)
def test_pytorch_errors_name_the_variable(
    changes: Dict[str, str], removed: Tuple[str, ...], message: str
) -> None:
    env = pytorch_pod(**changes)
    for name in removed:
        del env[name]
    with pytest.raises(TopologyError) as info:
        mindx_collective.resolve_pytorch(env, OPTIONS)
    assert str(info.value) == message


def test_tensorflow_errors_name_its_own_variables() -> None:
    with pytest.raises(TopologyError) as info:
        mindx_collective.resolve_tensorflow(tensorflow_pod(CM_RANK="3"), OPTIONS)
    assert str(info.value) == (
        "CM_RANK=3 is out of range: CM_WORKER_SIZE=12 / CM_LOCAL_WORKER=4 gives 3 NPU pods"
    )
