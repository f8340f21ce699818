"""The volcano source: VC_WORKER_HOSTS or /etc/volcano, VC_TASK_INDEX, MA_NUM_*, VC_WORKER_PORT."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

import pytest

from malaunch.errors import MissingInputError, TopologyError
from malaunch.models import ResolveOptions, Topology
from malaunch.testing import read_env_file
from malaunch.topology import volcano

FIXTURES = Path(__file__).parents[2] / "fixtures"
SHARED = FIXTURES / "shared"
ETC_3WORKERS = SHARED / "etc_volcano_3workers"
OPTIONS = ResolveOptions()
DEMO_HOSTS = [f"job-demo-worker-{i}.job-demo" for i in range(3)]


def ranks(topo: Topology) -> List[List[int]]:
    return [[d.rank for d in node.devices] for node in topo.nodes]


def test_volcano_3workers_node_1(tmp_path: Path) -> None:
    env = read_env_file(SHARED / "volcano_env_3workers.env")
    env["MALAUNCH_VOLCANO_DIR"] = str(tmp_path)  # no mounted files: the variable is used
    assert volcano.detect(env)
    topo = volcano.resolve(env, OPTIONS)
    assert topo.source == "volcano"
    assert [n.host for n in topo.nodes] == DEMO_HOSTS
    assert [n.name for n in topo.nodes] == [
        "job-demo-worker-0",
        "job-demo-worker-1",
        "job-demo-worker-2",
    ]
    assert topo.node_rank == 1
    assert ranks(topo) == [[0], [1], [2]]
    assert topo.master_addr == "job-demo-worker-0.job-demo"
    assert topo.master_port is None
    assert topo.job_id == "job-demo"
    assert topo.roles == {}
    assert topo.task is None


def test_hosts_from_mounted_worker_host_file() -> None:
    env = read_env_file(FIXTURES / "env" / "volcano_hosts_file_only.env")
    env["MALAUNCH_VOLCANO_DIR"] = str(ETC_3WORKERS)
    assert volcano.detect(env)
    topo = volcano.resolve(env, OPTIONS)
    assert [n.host for n in topo.nodes] == DEMO_HOSTS  # no trailing newline: still 3 hosts
    assert topo.node_rank == 2
    assert ranks(topo) == [[0, 1], [2, 3], [4, 5]]
    assert [d.device_id for d in topo.this_node.devices] == [0, 1]
    assert topo.master_addr == "job-demo-worker-0.job-demo"
    assert topo.job_id == "job-demo"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("worker.host", "a.job\nb.job\n"),  # a trailing newline is tolerated too
        ("VC_WORKER_HOSTS", "a.job,b.job"),  # the ConfigMap's other key
    ],
)
def test_other_host_files(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    env = {"MALAUNCH_VOLCANO_DIR": str(tmp_path), "VC_TASK_INDEX": "1"}
    topo = volcano.resolve(env, OPTIONS)
    assert [n.host for n in topo.nodes] == ["a.job", "b.job"]
    assert topo.node_rank == 1


def test_octopus_env() -> None:
    env = read_env_file(SHARED / "octopus_env_example.env")
    topo = volcano.resolve(env, OPTIONS)
    assert topo.nnodes == 2
    assert topo.node_rank == 1
    assert ranks(topo) == [list(range(8)), list(range(8, 16))]
    assert topo.world_size == 16
    uuid = "0d3c5a9e-0000-4000-8000-00000000000f"
    assert topo.master_addr == f"modelarts-job-{uuid}-worker-0.modelarts-job-{uuid}"
    assert topo.master_port == 6060
    assert topo.job_id == f"modelarts-job-{uuid}"
    assert topo.data.dataset == "/home/ma-user/datasets"
    assert topo.data.dataset_map == {
        "incr-dataset-1": "/home/ma-user/datasets/dataset-0",
        "incr-dataset-2": "/home/ma-user/datasets/dataset-1",
        "full-cache": "/home/ma-user/cached-datasets/12fdb1cd-0000-4000-8000-00000000c0de/dataset",
    }
    assert topo.data.cached_dataset == "/home/ma-user/cached-datasets"
    assert topo.data.result == "/home/ma-user/modelarts/result"
    assert topo.data.model == "/home/ma-user/modelarts/user-job-dir/model"


def test_modelarts_env_without_rank_table() -> None:
    env = read_env_file(SHARED / "modelarts_ascend_env_example.env")
    topo = volcano.resolve(env, OPTIONS)
    uuid = "0d3c5a9e-0000-4000-8000-000000000001"
    assert topo.node_rank == 0
    assert topo.this_node.name == f"modelarts-job-{uuid}-worker-0"
    assert ranks(topo)[0] == list(range(8))
    assert topo.world_size == 16
    assert topo.job_id == f"modelarts-job-{uuid}"
    assert topo.rank_table_file is None


def test_platform_rank_variables_are_ignored() -> None:
    env = read_env_file(FIXTURES / "env" / "volcano_platform_rank_vars.env")
    topo = volcano.resolve(env, OPTIONS)
    assert topo.node_rank == 1
    assert ranks(topo) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [d.device_id for d in topo.this_node.devices] == [4, 5, 6, 7]
    assert [d.local_index for d in topo.this_node.devices] == [0, 1, 2, 3]
    assert topo.world_size == 8
    assert topo.master_addr == "192.0.2.41"
    assert topo.master_port == 29400
    assert topo.this_node.name is None  # an IP address is no pod name
    without = {k: v for k, v in env.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    assert volcano.resolve(without, OPTIONS) == topo


@pytest.mark.parametrize(
    ("update", "nproc", "expected"),
    [
        ({"MA_NUM_GPUS": "0"}, None, [[0], [1]]),
        ({}, None, [[0], [1]]),
        ({"MA_NUM_GPUS": "4"}, 2, [[0, 1], [2, 3]]),
        ({}, 3, [[0, 1, 2], [3, 4, 5]]),
    ],
)
def test_processes_per_node(
    update: Dict[str, str], nproc: Optional[int], expected: List[List[int]]
) -> None:
    env = {"VC_WORKER_HOSTS": "a,b", "VC_TASK_INDEX": "0", **update}
    topo = volcano.resolve(env, ResolveOptions(nproc_per_node=nproc))
    assert ranks(topo) == expected


def test_empty_task_index_with_one_host() -> None:
    env = read_env_file(FIXTURES / "env" / "octopus_non_ascii_dataset_map.env")
    topo = volcano.resolve(env, OPTIONS)
    assert topo.node_rank == 0
    assert topo.master_addr == "192.0.2.51"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"VC_WORKER_HOSTS": "a,b"}, True),
        ({"VC_WORKER_HOSTS": ""}, False),
        ({"VC_TASK_INDEX": "1"}, False),  # no host list anywhere
        ({}, False),
    ],
)
def test_detect_without_mounted_files(tmp_path: Path, env: Dict[str, str], expected: bool) -> None:
    assert volcano.detect({**env, "MALAUNCH_VOLCANO_DIR": str(tmp_path)}) is expected


@pytest.mark.parametrize(
    ("env", "expected"),
    [({"VC_TASK_INDEX": "0"}, True), ({"MA_NUM_HOSTS": "3"}, True), ({}, False)],
)
def test_detect_with_mounted_files(env: Dict[str, str], expected: bool) -> None:
    assert volcano.detect({**env, "MALAUNCH_VOLCANO_DIR": str(ETC_3WORKERS)}) is expected


HOSTS = {"VC_WORKER_HOSTS": "a.job,b.job,c.job"}


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (
            {"VC_TASK_INDEX": ""},
            "VC_TASK_INDEX is empty and VC_WORKER_HOSTS lists 3 hosts: "
            "cannot tell which node this is",
        ),
        (
            {},
            "VC_TASK_INDEX is not set and VC_WORKER_HOSTS lists 3 hosts: "
            "cannot tell which node this is",
        ),
        (
            {"VC_TASK_INDEX": "3"},
            "VC_TASK_INDEX=3 is out of range for VC_WORKER_HOSTS (3 hosts)",
        ),
        (
            {"VC_TASK_INDEX": "0", "MA_NUM_HOSTS": "4"},
            "MA_NUM_HOSTS=4 does not match VC_WORKER_HOSTS, which lists 3 hosts",
        ),
        (
            {"VC_TASK_INDEX": "0", "VC_WORKER_NUM": "2"},
            "VC_WORKER_NUM=2 does not match VC_WORKER_HOSTS, which lists 3 hosts",
        ),
        (
            {"VC_TASK_INDEX": "0", "MA_NUM_HOSTS": "0"},
            'MA_NUM_HOSTS="0": expected an integer >= 1',
        ),
        (
            {"VC_TASK_INDEX": "0", "VC_WORKER_PORT": "0"},
            "VC_WORKER_PORT=\"0\": port '0' is not a number in 1-65535",
        ),
        (
            {"VC_TASK_INDEX": "0", "MA_NUM_GPUS": "-2"},
            'MA_NUM_GPUS="-2": expected a non-negative integer',
        ),
        (
            {"VC_TASK_INDEX": "0", "MA_NUM_GPUS": "8", "ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3"},
            "MA_NUM_GPUS asks for 8 processes per node but ASCEND_RT_VISIBLE_DEVICES lists 4",
        ),
        (
            {"VC_TASK_INDEX": "0", "ASCEND_RT_VISIBLE_DEVICES": "0, 1"},
            'ASCEND_RT_VISIBLE_DEVICES="0, 1": item 2 " 1" is not a device id '
            "(expected ascending integers without spaces, e.g. 0,1,2,3)",
        ),
        (
            {"VC_WORKER_HOSTS": "a.job,b.job:2222", "VC_TASK_INDEX": "0"},
            'VC_WORKER_HOSTS item 2 "b.job:2222": expected a host name or address without a port',
        ),
        (
            {"VC_TASK_INDEX": "0", "DATASET_MAP": "[]"},
            "DATASET_MAP: expected a JSON object of dataset name to path, got an array",
        ),
    ],
)
def test_broken_input(tmp_path: Path, update: Dict[str, str], message: str) -> None:
    env = {**HOSTS, "MALAUNCH_VOLCANO_DIR": str(tmp_path), **update}
    with pytest.raises(TopologyError) as info:
        volcano.resolve(env, OPTIONS)
    assert str(info.value) == message


def test_nproc_option_beyond_visible_devices() -> None:
    env = {"VC_WORKER_HOSTS": "a", "CUDA_VISIBLE_DEVICES": "0"}
    with pytest.raises(TopologyError) as info:
        volcano.resolve(env, ResolveOptions(nproc_per_node=2))
    assert str(info.value) == (
        "--nproc-per-node asks for 2 processes per node but CUDA_VISIBLE_DEVICES lists 1"
    )


def test_no_host_list_anywhere(tmp_path: Path) -> None:
    env = {"VC_TASK_INDEX": "0", "MALAUNCH_VOLCANO_DIR": str(tmp_path)}
    with pytest.raises(MissingInputError) as info:
        volcano.resolve(env, OPTIONS)
    assert str(info.value) == (
        f"VC_WORKER_HOSTS is not set and neither {tmp_path}/worker.host "
        f"nor {tmp_path}/VC_WORKER_HOSTS exists"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "{path} is empty: expected one host per line"),
        ("a.job\n\nb.job", "{path} line 2 \"\": '' is not a host name or address"),
        ("a.job\nb job", "{path} line 2 \"b job\": 'b job' is not a host name or address"),
    ],
)
def test_broken_worker_host_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "worker.host"
    path.write_text(text)
    env = {"VC_TASK_INDEX": "0", "MALAUNCH_VOLCANO_DIR": str(tmp_path)}
    with pytest.raises(TopologyError) as info:
        volcano.resolve(env, OPTIONS)
    assert str(info.value) == message.format(path=path)
