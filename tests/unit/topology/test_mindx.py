"""The mindx source: MindX ascend-operator AscendJob pods (MS_* variables), worker and scheduler."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from malaunch.errors import TopologyError
from malaunch.models import ResolveOptions, Task, Topology
from malaunch.testing import read_env_file
from malaunch.topology import mindx

SHARED = Path(__file__).parents[2] / "fixtures" / "shared"
OPTIONS = ResolveOptions()


def worker_env(**changes: str) -> Dict[str, str]:
    env = read_env_file(SHARED / "mindx_operator_mindspore_env.env")
    env.update(changes)
    return env


def scheduler_env(**changes: str) -> Dict[str, str]:
    # The scheduler pod: its own pod IP as MS_SCHED_HOST, no MS_NODE_RANK, no NPUs.
    env = worker_env(MS_ROLE="MS_SCHED", MS_SCHED_HOST="203.0.113.5", REPLICA_TYPE="Scheduler")
    for name in ("MS_NODE_RANK", "ASCEND_VISIBLE_DEVICES", "NPU_POD"):
        del env[name]
    env.update(changes)
    return env


def ranks(topo: Topology) -> List[List[int]]:
    return [[d.rank for d in node.devices] for node in topo.nodes]


def test_worker_pod_1_of_2() -> None:
    env = worker_env()
    assert mindx.detect(env)
    topo = mindx.resolve(env, OPTIONS)
    assert topo.source == "mindx"
    assert topo.nnodes == 2
    assert topo.node_rank == 1
    assert ranks(topo) == [list(range(8)), list(range(8, 16))]
    assert [d.device_id for d in topo.this_node.devices] == list(range(8))
    assert [d.local_index for d in topo.this_node.devices] == list(range(8))
    assert [n.host for n in topo.nodes] == ["mindx-worker-0", "mindx-worker-1"]
    assert (topo.master_addr, topo.master_port) == ("203.0.113.110", 2222)
    assert topo.roles == {"scheduler": ("203.0.113.110:2222",)}
    assert topo.task == Task(role="worker", index=1)
    assert topo.world_size == 16
    assert topo.rank_table_file is None
    # nodes[0] is a placeholder and the scheduler pod is no node: no job channel here.
    assert not topo.peers_reachable


def test_physical_ids_of_this_pod_and_indices_for_others() -> None:
    env = worker_env(MS_LOCAL_WORKER="4", MS_WORKER_NUM="8", ASCEND_VISIBLE_DEVICES="4,5,6,7")
    topo = mindx.resolve(env, OPTIONS)
    assert [d.device_id for d in topo.nodes[1].devices] == [4, 5, 6, 7]
    assert [d.local_index for d in topo.nodes[1].devices] == [0, 1, 2, 3]
    assert [d.device_id for d in topo.nodes[0].devices] == [0, 1, 2, 3]


def test_nproc_per_node_overrides_and_mismatched_visible_list_gives_indices() -> None:
    topo = mindx.resolve(worker_env(), ResolveOptions(nproc_per_node=2))
    assert ranks(topo) == [[0, 1], [2, 3]]
    assert [d.device_id for d in topo.this_node.devices] == [0, 1]
    env = worker_env(ASCEND_VISIBLE_DEVICES="2,3")  # 2 ids for 8 processes: not this pod's map
    assert [d.device_id for d in mindx.resolve(env, OPTIONS).this_node.devices] == list(range(8))


def test_ipv6_scheduler_is_bracketed_in_roles() -> None:
    topo = mindx.resolve(worker_env(MS_SCHED_HOST="2001:db8::10"), OPTIONS)
    assert topo.master_addr == "2001:db8::10"
    assert topo.roles == {"scheduler": ("[2001:db8::10]:2222",)}


def test_scheduler_pod() -> None:
    env = scheduler_env()
    assert mindx.detect(env)
    topo = mindx.resolve(env, OPTIONS)
    assert topo.task == Task(role="scheduler", index=0)
    assert topo.node_rank == 0
    assert topo.nnodes == 2
    assert topo.world_size == 16
    assert (topo.master_addr, topo.master_port) == ("203.0.113.5", 2222)
    assert topo.roles == {"scheduler": ("203.0.113.5:2222",)}


def test_scheduler_pod_without_local_worker_still_counts_every_worker() -> None:
    env = scheduler_env()
    del env["MS_LOCAL_WORKER"]
    topo = mindx.resolve(env, OPTIONS)
    assert topo.world_size == 16
    assert topo.task == Task(role="scheduler", index=0)


@pytest.mark.parametrize(
    ("total", "nnodes"), [("10000", 1), ("20000", 2), ("30006", 6), ("100003", None)]
)
def test_scheduler_pod_without_local_worker_keeps_each_pod_within_bounds(
    total: str, nnodes: Optional[int]
) -> None:
    """One pod of every worker would be millions of slots on one node: the workers are split
    into the fewest pods of equal size that keep each within what one launcher runs."""
    env = scheduler_env(MS_WORKER_NUM=total)
    del env["MS_LOCAL_WORKER"]
    if nnodes is None:  # a prime: only pods of 1, more pods than a job has nodes
        with pytest.raises(TopologyError, match="gives 100003 worker pods; at most 100000"):
            mindx.resolve(env, OPTIONS)
        return
    topo = mindx.resolve(env, OPTIONS)
    assert (topo.nnodes, topo.world_size) == (nnodes, int(total))


@pytest.mark.parametrize(
    "changes",
    [
        {"MS_ROLE": ""},
        {"MS_SCHED_HOST": " "},
        {"MS_WORKER_NUM": ""},
        {"RANK_TABLE_FILE": "/user/config/jobstart_hccl.json"},
    ],
)
def test_not_detected(changes: Dict[str, str]) -> None:
    assert not mindx.detect(worker_env(**changes))


def test_not_detected_on_other_platforms() -> None:
    assert not mindx.detect(read_env_file(SHARED / "volcano_env_3workers.env"))
    assert not mindx.detect({})


@pytest.mark.parametrize(
    ("changes", "removed", "message"),
    [
        ({"MS_WORKER_NUM": "12"}, (), "MS_WORKER_NUM=12 is not a multiple of MS_LOCAL_WORKER=8"),
        ({"MS_NODE_RANK": "2"}, (), "MS_NODE_RANK=2 is out of range: MS_WORKER_NUM=16 / "),
        ({"MS_NODE_RANK": "-1"}, (), 'MS_NODE_RANK="-1": expected a non-negative integer'),
        ({"MS_LOCAL_WORKER": "0"}, (), 'MS_LOCAL_WORKER="0": expected an integer >= 1'),
        ({"MS_WORKER_NUM": "x"}, (), 'MS_WORKER_NUM="x": expected an integer >= 1'),
        ({"MS_SCHED_PORT": "70000"}, (), "MS_SCHED_PORT=\"70000\": port '70000' is not a number"),
        ({"MS_ROLE": "MS_PSERVER"}, (), 'MS_ROLE="MS_PSERVER": expected MS_SCHED or MS_WORKER'),
        ({"MS_SCHED_HOST": "a b"}, (), "MS_SCHED_HOST: 'a b' is not a host name or address"),
        ({"ASCEND_VISIBLE_DEVICES": "0,x"}, (), 'ASCEND_VISIBLE_DEVICES="0,x": item 2 "x"'),
        (
            {"ASCEND_VISIBLE_DEVICES": "0,1,2,3,4,5,6,6"},
            (),
            'ASCEND_VISIBLE_DEVICES="0,1,2,3,4,5,6,6": item 8 "6" lists a device id twice',
        ),
        (
            {"MS_WORKER_NUM": "150000", "MS_LOCAL_WORKER": "1"},
            (),
            "MS_WORKER_NUM=150000 / MS_LOCAL_WORKER=1 gives 150000 worker pods; at most 100000",
        ),
        ({"MS_WORKER_NUM": "6400000"}, (), 'MS_WORKER_NUM="6400000": expected at most 200000'),
        ({}, ("MS_NODE_RANK",), "MS_NODE_RANK is not set: the ascend-operator sets it"),
        ({}, ("MS_LOCAL_WORKER",), "MS_LOCAL_WORKER is not set: the ascend-operator sets it"),
        ({}, ("MS_SCHED_PORT",), "MS_SCHED_PORT is not set: the ascend-operator sets"),
    ],
)
def test_errors_name_the_variable(
    changes: Dict[str, str], removed: tuple[str, ...], message: str
) -> None:
    env = worker_env(**changes)
    for name in removed:
        del env[name]
    with pytest.raises(TopologyError, match=re.escape(message)):
        mindx.resolve(env, OPTIONS)


def test_out_of_range_message_names_the_pod_count() -> None:
    with pytest.raises(TopologyError) as caught:
        mindx.resolve(worker_env(MS_NODE_RANK="2"), OPTIONS)
    assert str(caught.value) == (
        "MS_NODE_RANK=2 is out of range: MS_WORKER_NUM=16 / MS_LOCAL_WORKER=8 gives 2 worker pods"
    )
