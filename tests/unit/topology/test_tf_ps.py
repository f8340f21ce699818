"""The tf-ps source: TF_PS_HOSTS / TF_WORKER_HOSTS, MA_TASK_NAME, VC_TASK_INDEX."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from malaunch.errors import TopologyError
from malaunch.models import ResolveOptions, Task
from malaunch.testing import read_env_file
from malaunch.topology import tf_ps

FIXTURES = Path(__file__).parents[2] / "fixtures"
OPTIONS = ResolveOptions()


def test_volcano_tf_job_worker_1() -> None:
    env = read_env_file(FIXTURES / "shared" / "tf_ps_env_2ps_3workers.env")
    assert tf_ps.detect(env)
    topo = tf_ps.resolve(env, OPTIONS)
    assert topo.source == "tf-ps"
    assert topo.roles == {
        "ps": ("job-tf-ps-0.job-tf:2222", "job-tf-ps-1.job-tf:2222"),
        "worker": (
            "job-tf-worker-0.job-tf:2222",
            "job-tf-worker-1.job-tf:2222",
            "job-tf-worker-2.job-tf:2222",
        ),
    }
    assert topo.task == Task(role="worker", index=1)
    assert [(n.role, n.host) for n in topo.nodes] == [
        ("ps", "job-tf-ps-0.job-tf"),
        ("ps", "job-tf-ps-1.job-tf"),
        ("worker", "job-tf-worker-0.job-tf"),
        ("worker", "job-tf-worker-1.job-tf"),
        ("worker", "job-tf-worker-2.job-tf"),
    ]
    assert [n.name for n in topo.nodes][:2] == ["job-tf-ps-0", "job-tf-ps-1"]
    assert topo.node_rank == 3
    assert topo.this_node.host == "job-tf-worker-1.job-tf"
    assert [d.rank for d in topo.this_node.devices] == [1]
    assert [len(n.devices) for n in topo.nodes] == [0, 0, 1, 1, 1]
    assert topo.world_size == 3
    assert topo.master_addr == "job-tf-worker-0.job-tf"
    assert topo.master_port is None
    assert topo.job_id == "job-tf"


def test_brackets_quotes_spaces_and_ipv6() -> None:
    env = read_env_file(FIXTURES / "env" / "tf_ps_brackets_quotes.env")
    topo = tf_ps.resolve(env, OPTIONS)
    assert topo.roles == {
        "ps": ("[2001:db8::11]:2222", "[2001:db8::12]:2222"),
        "worker": ("192.0.2.31:2222", "192.0.2.32:2222", "192.0.2.33:2222"),
    }
    assert topo.task == Task(role="ps", index=1)
    assert topo.node_rank == 1
    assert topo.this_node.host == "2001:db8::12"
    assert topo.this_node.devices == ()
    assert topo.world_size == 3
    assert topo.master_addr == "192.0.2.31"
    assert topo.job_id is None


def test_chief_hosts_take_rank_zero() -> None:
    env = {
        "TF_CHIEF_HOSTS": "c0:2222",
        "TF_PS_HOSTS": "p0:2222",
        "TF_WORKER_HOSTS": "w0:2222,w1:2222",
        "MA_TASK_NAME": "worker",
        "VC_TASK_INDEX": "1",
        "MA_VJ_NAME": "ma-job-42",
    }
    topo = tf_ps.resolve(env, OPTIONS)
    assert list(topo.roles) == ["chief", "ps", "worker"]
    assert [(n.role, [d.rank for d in n.devices]) for n in topo.nodes] == [
        ("chief", [0]),
        ("ps", []),
        ("worker", [1]),
        ("worker", [2]),
    ]
    assert topo.node_rank == 3
    assert topo.master_addr == "c0"
    assert topo.job_id == "modelarts-job-42"


def test_single_task_role_needs_no_index() -> None:
    env = {"TF_PS_HOSTS": "p0:1", "TF_WORKER_HOSTS": "w0:2,w1:3", "MA_TASK_NAME": "ps"}
    topo = tf_ps.resolve(env, OPTIONS)
    assert topo.task == Task(role="ps", index=0)
    assert topo.node_rank == 0


def test_data_paths_are_parsed() -> None:
    env = {
        "TF_PS_HOSTS": "p0:1",
        "TF_WORKER_HOSTS": "w0:2",
        "MA_TASK_NAME": "worker",
        "DATASET_MAP": '{"d": "/data/d"}',
    }
    assert tf_ps.resolve(env, OPTIONS).data.dataset_map == {"d": "/data/d"}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TF_PS_HOSTS": "p:1", "TF_WORKER_HOSTS": "w:1"}, True),
        ({"TF_PS_HOSTS": "p:1"}, False),
        ({"TF_WORKER_HOSTS": "w:1"}, False),
        ({"TF_PS_HOSTS": "", "TF_WORKER_HOSTS": "w:1"}, False),
        ({"TF_CONFIG": "{}", "VC_WORKER_HOSTS": "a"}, False),
    ],
)
def test_detect(env: Dict[str, str], expected: bool) -> None:
    assert tf_ps.detect(env) is expected


BASE = {"TF_PS_HOSTS": "p0:2222,p1:2222", "TF_WORKER_HOSTS": "w0:2222,w1:2222,w2:2222"}


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (
            {"TF_WORKER_HOSTS": "host-a:2222,host-b", "MA_TASK_NAME": "worker"},
            'TF_WORKER_HOSTS item 2 "host-b": expected host:port',
        ),
        (
            {"TF_PS_HOSTS": "[p0:2222,, p1:2222]", "MA_TASK_NAME": "ps"},
            'TF_PS_HOSTS item 2 is empty in "[p0:2222,, p1:2222]"',
        ),
        (
            {"TF_PS_HOSTS": "2001:db8::1:2222", "MA_TASK_NAME": "ps"},
            'TF_PS_HOSTS item 1 "2001:db8::1:2222": an IPv6 address must be written in '
            "brackets, [address]:port",
        ),
        (
            {"MA_TASK_NAME": "worker", "VC_TASK_INDEX": "3"},
            "VC_TASK_INDEX=3 is out of range for TF_WORKER_HOSTS (3 tasks)",
        ),
        (
            {"MA_TASK_NAME": "worker"},
            "VC_TASK_INDEX is not set and TF_WORKER_HOSTS lists 3 worker tasks: "
            "cannot tell which one this container runs",
        ),
        (
            {"MA_TASK_NAME": "worker", "VC_TASK_INDEX": ""},
            "VC_TASK_INDEX is not set and TF_WORKER_HOSTS lists 3 worker tasks: "
            "cannot tell which one this container runs",
        ),
        (
            {"MA_TASK_NAME": "ps", "VC_TASK_INDEX": "one"},
            'VC_TASK_INDEX="one": expected a non-negative integer',
        ),
        (
            {"VC_TASK_INDEX": "0"},
            "MA_TASK_NAME is not set: expected the task this container runs (ps, worker)",
        ),
        (
            {"MA_TASK_NAME": "chief", "VC_TASK_INDEX": "0"},
            'MA_TASK_NAME="chief": expected one of ps, worker',
        ),
        (
            {"TF_PS_HOSTS": "w1:2222", "MA_TASK_NAME": "ps"},
            "TF_PS_HOSTS item 1 and TF_WORKER_HOSTS item 2 are both at w1:2222",
        ),
        (
            {"TF_WORKER_HOSTS": "w0:2222,W0:2222", "MA_TASK_NAME": "ps"},
            "TF_WORKER_HOSTS item 1 and TF_WORKER_HOSTS item 2 are both at W0:2222",
        ),
        (
            {"TF_CHIEF_HOSTS": "p1:2222", "MA_TASK_NAME": "ps"},
            "TF_CHIEF_HOSTS item 1 and TF_PS_HOSTS item 2 are both at p1:2222",
        ),
        (
            {"TF_PS_HOSTS": "[fe80::1%$(id)]:2222", "MA_TASK_NAME": "ps"},
            "TF_PS_HOSTS item 1 \"[fe80::1%$(id)]:2222\": 'fe80::1%$(id)' is not an IPv6 address "
            "(a zone after % holds only letters, digits, _ . -)",
        ),
        (
            {"TF_PS_HOSTS": "", "MA_TASK_NAME": "ps"},
            "TF_PS_HOSTS is not set (the tf-ps source needs TF_PS_HOSTS and TF_WORKER_HOSTS)",
        ),
    ],
)
def test_broken_input(update: Dict[str, str], message: str) -> None:
    with pytest.raises(TopologyError) as info:
        tf_ps.resolve({**BASE, **update}, OPTIONS)
    assert str(info.value) == message
