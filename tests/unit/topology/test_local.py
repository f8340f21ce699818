"""The local source and the loopback port helpers it uses."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from malaunch.errors import TopologyError
from malaunch.models import ResolveOptions
from malaunch.net import free_port as malaunch_free_port
from malaunch.net import port_in_use
from malaunch.testing import read_env_file
from malaunch.topology import local
from ports import Reservations

SHARED = Path(__file__).parents[2] / "fixtures" / "shared"


@pytest.mark.parametrize(
    ("env", "nproc", "device_ids"),
    [
        ({}, None, [0]),
        ({}, 4, [0, 1, 2, 3]),
        ({"ASCEND_RT_VISIBLE_DEVICES": "4,5,6,7"}, None, [4, 5, 6, 7]),
        ({"ASCEND_RT_VISIBLE_DEVICES": "4,5,6,7"}, 2, [4, 5]),
        ({"CUDA_VISIBLE_DEVICES": "1,3"}, None, [1, 3]),
        ({"CUDA_VISIBLE_DEVICES": ""}, None, [0]),  # CUDA's "no GPU": one CPU process
        ({"ASCEND_RT_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "0,1,2"}, None, [0, 1]),
    ],
)
def test_processes_and_devices(
    env: Dict[str, str], nproc: Optional[int], device_ids: List[int]
) -> None:
    topo = local.resolve(env, ResolveOptions(nproc_per_node=nproc))
    assert topo.source == "local"
    assert topo.nnodes == 1
    assert topo.node_rank == 0
    assert topo.this_node.host == "127.0.0.1"
    assert topo.master_addr == "127.0.0.1"
    assert [d.device_id for d in topo.this_node.devices] == device_ids
    assert [d.rank for d in topo.this_node.devices] == list(range(len(device_ids)))
    assert [d.local_index for d in topo.this_node.devices] == list(range(len(device_ids)))
    assert topo.world_size == len(device_ids)


def test_master_port_is_free_on_loopback() -> None:
    topo = local.resolve({}, ResolveOptions())
    assert topo.master_port is not None
    assert 1 <= topo.master_port <= 65535
    assert not port_in_use("127.0.0.1", topo.master_port)


def test_generated_job_id_unless_the_platform_names_one() -> None:
    first = local.resolve({}, ResolveOptions()).job_id
    second = local.resolve({}, ResolveOptions()).job_id
    assert first is not None
    assert re.fullmatch(r"malaunch-\d{8}-\d{6}-[0-9a-f]{4}", first)
    assert first != second
    named = local.resolve({"MA_VJ_NAME": "ma-job-7"}, ResolveOptions())
    assert named.job_id == "modelarts-job-7"


def test_data_paths() -> None:
    env = {"RESULT": "/tmp/result", "DATASET_MAP": '{"a": "/d/a"}'}
    data = local.resolve(env, ResolveOptions()).data
    assert data.result == "/tmp/result"
    assert data.dataset_map == {"a": "/d/a"}


def test_platform_variables_do_not_matter() -> None:
    """A ModelArts environment resolved as local is still this machine alone."""
    env = read_env_file(SHARED / "modelarts_ascend_env_example.env")
    topo = local.resolve(env, ResolveOptions(nproc_per_node=2))
    assert topo.nnodes == 1
    assert topo.world_size == 2
    assert topo.job_id == "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001"
    assert local.detect(env)
    assert local.detect({})


def test_visible_devices_with_spaces_are_refused() -> None:
    with pytest.raises(TopologyError) as info:
        local.resolve({"CUDA_VISIBLE_DEVICES": "0,1 "}, ResolveOptions())
    assert str(info.value) == (
        'CUDA_VISIBLE_DEVICES="0,1 ": item 2 "1 " is not a device id '
        "(expected ascending integers without spaces, e.g. 0,1,2,3)"
    )


def test_free_port_and_port_in_use(free_port: Reservations) -> None:
    assert not port_in_use("127.0.0.1", malaunch_free_port())
    # Reserved for this test (tests/ports.py), so nothing else takes it once the server below
    # has closed: the last check sees this test's doing only.
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        assert port_in_use("127.0.0.1", port)
    assert not port_in_use("127.0.0.1", port)
