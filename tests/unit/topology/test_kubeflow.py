"""The kubeflow source: PyTorchJob (training-operator v1) and Trainer v2 PET_* variables."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from malaunch.errors import TopologyError
from malaunch.models import ResolveOptions, Topology
from malaunch.testing import read_env_file
from malaunch.topology import kubeflow

ENV = Path(__file__).parents[2] / "fixtures" / "env"
OPTIONS = ResolveOptions()


def pytorchjob(**changes: str) -> Dict[str, str]:
    env = read_env_file(ENV / "kubeflow_pytorchjob_worker.env")
    env.update(changes)
    return env


def ranks(topo: Topology) -> List[List[int]]:
    return [[d.rank for d in node.devices] for node in topo.nodes]


def test_v1_worker_pod_reads_node_rank_not_process_world_size() -> None:
    env = pytorchjob()
    assert kubeflow.detect(env)
    topo = kubeflow.resolve(env, OPTIONS)
    assert topo.source == "kubeflow"
    assert [n.host for n in topo.nodes] == [
        "bert-master-0", "bert-worker-0", "bert-worker-1", "bert-worker-2",
    ]  # fmt: skip
    assert [n.name for n in topo.nodes] == [n.host for n in topo.nodes]
    assert topo.node_rank == 2
    assert ranks(topo) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert topo.world_size == 16  # WORLD_SIZE=16 counts processes; RANK=2 is a node rank
    assert (topo.master_addr, topo.master_port) == ("bert-master-0", 23456)
    assert topo.job_id == "bert"
    assert topo.peers_reachable


def test_master_pod_is_node_0() -> None:
    env = pytorchjob(HOSTNAME="bert-master-0", RANK="0", PET_NODE_RANK="0")
    topo = kubeflow.resolve(env, OPTIONS)
    assert topo.node_rank == 0
    assert ranks(topo)[0] == [0, 1, 2, 3]


def test_trainer_v2_pet_only() -> None:
    env = read_env_file(ENV / "kubeflow_trainer_v2.env")
    assert kubeflow.detect(env)
    topo = kubeflow.resolve(env, OPTIONS)
    assert [n.host for n in topo.nodes] == [
        "llama-trainer-node-0-0.llama",
        "llama-trainer-node-0-1.llama",
    ]
    assert [n.name for n in topo.nodes] == ["llama-trainer-node-0-0", "llama-trainer-node-0-1"]
    assert topo.node_rank == 1
    assert ranks(topo)[1] == list(range(8, 16))
    assert (topo.master_addr, topo.master_port) == ("llama-trainer-node-0-0.llama", 29500)
    assert topo.job_id == "llama"


def test_nproc_per_node_option_wins_and_visible_devices_are_this_pods() -> None:
    env = pytorchjob(CUDA_VISIBLE_DEVICES="4,5")
    topo = kubeflow.resolve(env, ResolveOptions(nproc_per_node=2))
    assert ranks(topo) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [d.device_id for d in topo.this_node.devices] == [4, 5]


@pytest.mark.parametrize("word", ["auto", "gpu", "cpu", "AUTO"])
def test_nproc_words_mean_one_per_visible_device(word: str) -> None:
    env = pytorchjob(PET_NPROC_PER_NODE=word, ASCEND_RT_VISIBLE_DEVICES="0,1,2")
    assert ranks(kubeflow.resolve(env, OPTIONS))[2] == [6, 7, 8]
    del env["ASCEND_RT_VISIBLE_DEVICES"]
    assert ranks(kubeflow.resolve(env, OPTIONS))[2] == [2]


def test_older_operator_counted_pods_in_world_size() -> None:
    # training-operator releases before PET_NNODES: WORLD_SIZE = replicas, RANK = node rank.
    env = {"MASTER_ADDR": "old-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "3", "RANK": "1"}
    assert not kubeflow.detect(env)  # nothing Kubeflow-only: auto refuses instead
    topo = kubeflow.resolve(env, ResolveOptions(nproc_per_node=2))
    assert (topo.nnodes, topo.node_rank, topo.world_size) == (3, 1, 6)
    assert [n.host for n in topo.nodes] == ["old-master-0", "old-worker-0", "old-worker-1"]


MINDX_POD = {"MASTER_ADDR": "10.0.0.1", "RANK": "1", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}


@pytest.mark.parametrize(
    ("env", "marker"),
    [
        # A MindX AscendJob pod without MINDX_TASK_ID: 2 pods of 8 NPUs, not 16 nodes.
        (MINDX_POD, "LOCAL_WORLD_SIZE=8"),
        ({**MINDX_POD, "LOCAL_RANK": "0,1,2,3,4,5,6,7"}, "LOCAL_WORLD_SIZE=8"),
        ({"MASTER_ADDR": "10.0.0.1", "RANK": "1", "WORLD_SIZE": "16", "LOCAL_RANK": "0,1"},
         "LOCAL_RANK=0,1"),
        # A launcher's worker (torchrun-style): WORLD_SIZE and RANK are a process's.
        ({"MASTER_ADDR": "10.0.0.1", "RANK": "11", "WORLD_SIZE": "16", "LOCAL_RANK": "3"},
         "LOCAL_RANK=3"),
    ],
)  # fmt: skip
def test_a_process_count_in_world_size_is_not_taken_for_nodes(
    env: Dict[str, str], marker: str
) -> None:
    with pytest.raises(TopologyError) as info:
        kubeflow.resolve(env, OPTIONS)
    assert str(info.value) == (
        f"PET_NNODES is not set, and WORLD_SIZE=16 cannot count the PyTorchJob's nodes where "
        f"{marker} is set (it counts processes then): set PET_NNODES, or read a MindX AscendJob "
        "pod with --topology mindx-pytorch"
    )


def test_with_pet_nnodes_local_world_size_does_not_matter() -> None:
    # WORLD_SIZE is not read for nodes at all then (current operators set both).
    env = pytorchjob(LOCAL_WORLD_SIZE="4", LOCAL_RANK="0,1,2,3")
    assert kubeflow.resolve(env, OPTIONS).nnodes == 4


def test_a_long_marker_is_cut_in_the_message() -> None:
    local_rank = ",".join(map(str, range(64)))
    env = {"MASTER_ADDR": "10.0.0.1", "RANK": "1", "WORLD_SIZE": "128", "LOCAL_RANK": local_rank}
    with pytest.raises(TopologyError, match=rf"where LOCAL_RANK={local_rank[:40]}\.\.\. is set"):
        kubeflow.resolve(env, OPTIONS)


def test_is_v1_master() -> None:
    assert kubeflow.is_v1_master("bert-master-0")
    assert kubeflow.is_v1_master(" job-master-0.job ")
    assert not kubeflow.is_v1_master("job-master-1")
    assert not kubeflow.is_v1_master("10.0.0.1")


def test_single_node_without_master_uses_loopback() -> None:
    topo = kubeflow.resolve({"PET_NNODES": "1"}, OPTIONS)
    assert (topo.nnodes, topo.node_rank, topo.master_addr) == (1, 0, "127.0.0.1")
    assert topo.peers_reachable


@pytest.mark.parametrize(
    ("master", "hostname"),
    [("10.0.0.7", "bert-worker-1"), ("bert-master-0", "someone-else")],
)
def test_unknown_peers_get_placeholders_and_the_job_channel_dials_the_master(
    master: str, hostname: str
) -> None:
    env = pytorchjob(MASTER_ADDR=master, PET_MASTER_ADDR=master, HOSTNAME=hostname)
    topo = kubeflow.resolve(env, OPTIONS)
    assert [n.host for n in topo.nodes] == [master, "kubeflow-node-1", "kubeflow-node-2",
                                            "kubeflow-node-3"]  # fmt: skip
    assert topo.peers_reachable  # nodes[0] is the master, which every pod dials
    assert topo.master_addr == master


@pytest.mark.parametrize(
    ("master", "nnodes", "rank", "hostname", "expected"),
    [
        ("j-master-0", 2, 1, None, ["j-master-0", "j-worker-0"]),
        ("j-master-0.ns.svc", 2, 0, "j-master-0", ["j-master-0.ns.svc", "j-worker-0.ns.svc"]),
        ("t-trainer-node-0-0", 2, 1, "t-trainer-node-0-1", ["t-trainer-node-0-0",
                                                             "t-trainer-node-0-1"]),
        ("10.1.2.3", 2, 0, None, None),
        ("j-worker-0", 2, 0, None, None),
    ],
)  # fmt: skip
def test_peer_hosts(
    master: str, nnodes: int, rank: int, hostname: Optional[str], expected: Optional[List[str]]
) -> None:
    assert kubeflow.peer_hosts(master, nnodes, rank, hostname) == expected


@pytest.mark.parametrize(
    "env",
    [
        {"PET_NNODES": "2"},
        {"PET_NODE_RANK": "0"},
        {"PET_MASTER_ADDR": "x-master-0"},
        {"PET_RDZV_ENDPOINT": "x:1"},
    ],
)
def test_detected_by_any_pet_marker(env: Dict[str, str]) -> None:
    assert kubeflow.detect(env)


def test_not_detected_elsewhere() -> None:
    assert not kubeflow.detect({})
    assert not kubeflow.detect({"MASTER_ADDR": "a", "RANK": "1", "WORLD_SIZE": "2"})
    assert not kubeflow.detect({"PET_NNODES": " "})
    assert not kubeflow.detect(read_env_file(ENV / "volcano_pytorch_worker.env"))


def test_elastic_job_is_refused() -> None:
    env = read_env_file(ENV / "kubeflow_pytorchjob_elastic.env")
    assert kubeflow.detect(env)
    with pytest.raises(TopologyError) as info:
        kubeflow.resolve(env, OPTIONS)
    assert str(info.value) == (
        'PET_NNODES="1:3": elastic PyTorchJobs (elasticPolicy, torchrun rendezvous) are not '
        "supported; malaunch starts a fixed number of nodes with fixed node ranks: remove "
        "elasticPolicy and give the job a Master replica"
    )


def test_rendezvous_endpoint_alone_is_elastic_too() -> None:
    with pytest.raises(TopologyError, match=r'^PET_RDZV_ENDPOINT="x:1": elastic'):
        kubeflow.resolve(pytorchjob(PET_RDZV_ENDPOINT="x:1"), OPTIONS)


ERRORS: List[Tuple[Dict[str, str], Tuple[str, ...], str]] = [
    (
        {"PET_NODE_RANK": "4", "RANK": "4"},
        (),
        "PET_NODE_RANK=4 is out of range for PET_NNODES=4",
    ),
    (
        {"RANK": "3"},
        (),
        "PET_NODE_RANK=2 and RANK=3 disagree: the training operator sets both to this pod's "
        "node rank",
    ),
    (
        {},
        ("PET_NODE_RANK", "RANK"),
        "PET_NODE_RANK is not set (nor RANK) and PET_NNODES=4: cannot tell which node this is "
        "(a PyTorchJob sets it when it has a Master replica)",
    ),
    (
        {},
        ("PET_MASTER_ADDR", "MASTER_ADDR"),
        "PET_MASTER_ADDR is not set (nor MASTER_ADDR): the operator sets it when the "
        "PyTorchJob has a Master replica",
    ),
    (
        {},
        ("PET_NNODES", "WORLD_SIZE"),
        "PET_NNODES is not set (nor WORLD_SIZE): cannot tell how many nodes the PyTorchJob has",
    ),
    ({"PET_NNODES": "0"}, (), 'PET_NNODES="0": expected an integer >= 1'),
    ({"PET_NNODES": "200000"}, (), 'PET_NNODES="200000": expected at most 100000'),
    (
        {"PET_NPROC_PER_NODE": "four"},
        (),
        'PET_NPROC_PER_NODE="four": expected a number of processes, or auto, gpu, cpu',
    ),
    ({"PET_NPROC_PER_NODE": "0"}, (), 'PET_NPROC_PER_NODE="0": expected an integer >= 1'),
]


@pytest.mark.parametrize(("changes", "removed", "message"), ERRORS)
def test_errors_name_the_variable(
    changes: Dict[str, str], removed: Tuple[str, ...], message: str
) -> None:
    env = pytorchjob(**changes)
    for name in removed:
        del env[name]
    with pytest.raises(TopologyError) as info:
        kubeflow.resolve(env, OPTIONS)
    assert str(info.value) == message
