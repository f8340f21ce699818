"""The tf-config source: Kubeflow / Volcano TF_CONFIG, including the sparse worker form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from malaunch.errors import TopologyError
from malaunch.models import ResolveOptions, Task
from malaunch.testing import read_env_file
from malaunch.topology import tf_config

FIXTURES = Path(__file__).parents[2] / "fixtures"
OPTIONS = ResolveOptions()


def kubeflow_example() -> Dict[str, Any]:
    loaded: Dict[str, Any] = json.loads(
        (FIXTURES / "shared" / "tf_config_example.json").read_text()
    )
    return loaded


def test_kubeflow_example_worker_2() -> None:
    env = {"TF_CONFIG": json.dumps(kubeflow_example())}
    assert tf_config.detect(env)
    topo = tf_config.resolve(env, OPTIONS)
    assert topo.source == "tf-config"
    assert topo.task == Task(role="worker", index=2)
    assert list(topo.roles) == ["chief", "ps", "worker", "evaluator"]
    assert topo.roles["worker"] == (
        "tfjob-demo-worker-0.default.svc:2222",
        "tfjob-demo-worker-1.default.svc:2222",
        "tfjob-demo-worker-2.default.svc:2222",
    )
    assert topo.this_node.host == "tfjob-demo-worker-2.default.svc"
    assert topo.this_node.role == "worker"
    assert topo.node_rank == 5  # chief, ps0, ps1, worker0, worker1, worker2
    # chief is rank 0, workers follow; ps and evaluator train nothing
    assert [(n.role, [d.rank for d in n.devices]) for n in topo.nodes] == [
        ("chief", [0]),
        ("ps", []),
        ("ps", []),
        ("worker", [1]),
        ("worker", [2]),
        ("worker", [3]),
        ("evaluator", []),
    ]
    assert topo.world_size == 4
    assert topo.master_addr == "tfjob-demo-chief-0.default.svc"
    assert topo.job_id == "tfjob-demo"


def test_volcano_tf_config_without_environment() -> None:
    env = read_env_file(FIXTURES / "shared" / "tf_ps_env_2ps_3workers.env")
    topo = tf_config.resolve(env, OPTIONS)
    assert topo.task == Task(role="worker", index=1)
    assert topo.node_rank == 3
    assert topo.world_size == 3
    assert topo.master_addr == "job-tf-worker-0.job-tf"
    assert topo.roles["ps"] == ("job-tf-ps-0.job-tf:2222", "job-tf-ps-1.job-tf:2222")


def test_sparse_worker_keeps_what_is_known() -> None:
    env = read_env_file(FIXTURES / "env" / "tf_config_sparse_worker.env")
    topo = tf_config.resolve(env, OPTIONS)
    assert topo.task == Task(role="worker", index=3)
    assert topo.roles == {
        "ps": ("tfjob-sparse-ps-0.ns.svc:2222", "tfjob-sparse-ps-1.ns.svc:2222"),
        "worker": ("tfjob-sparse-worker-3.ns.svc:2222",),
    }
    assert topo.node_rank == 2
    assert topo.this_node.host == "tfjob-sparse-worker-3.ns.svc"
    assert [d.rank for d in topo.this_node.devices] == [3]
    assert topo.master_addr == "tfjob-sparse-worker-3.ns.svc"


def test_legacy_master_and_unlisted_evaluator() -> None:
    env = read_env_file(FIXTURES / "env" / "tf_config_legacy_master.env")
    topo = tf_config.resolve(env, OPTIONS)
    assert list(topo.roles) == ["chief", "ps", "worker"]
    assert topo.roles["chief"] == ("tfjob-old-master-0.ns.svc:2222",)
    assert topo.task == Task(role="evaluator", index=0)
    assert topo.this_node.host == "tfjob-old-evaluator-0"
    assert topo.this_node.role == "evaluator"
    assert topo.this_node.devices == ()
    assert topo.node_rank == 4
    assert topo.master_addr == "tfjob-old-master-0.ns.svc"
    assert topo.world_size == 3


def test_master_task_type_means_chief() -> None:
    config = {"cluster": {"master": ["m:1"], "worker": ["w:1"]}, "task": {"type": "master"}}
    topo = tf_config.resolve({"TF_CONFIG": json.dumps(config)}, OPTIONS)
    assert topo.task == Task(role="chief", index=0)
    assert topo.node_rank == 0


def test_ipv6_addresses_and_string_index() -> None:
    config = {
        "cluster": {"ps": ["[2001:db8::1]:2222"], "worker": ["[2001:db8::2]:2222"]},
        "task": {"type": "ps", "index": "0"},
        "environment": "cloud",
    }
    topo = tf_config.resolve({"TF_CONFIG": json.dumps(config)}, OPTIONS)
    assert topo.roles["ps"] == ("[2001:db8::1]:2222",)
    assert topo.this_node.host == "2001:db8::1"
    assert topo.master_addr == "2001:db8::2"


def test_detect() -> None:
    assert tf_config.detect({"TF_CONFIG": "{}"})
    assert not tf_config.detect({"TF_CONFIG": "  "})
    assert not tf_config.detect({"TF_PS_HOSTS": "p:1", "TF_WORKER_HOSTS": "w:1"})


GOOD_CLUSTER = {"ps": ["p0:2222"], "worker": ["w0:2222", "w1:2222", "w2:2222"]}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            "{",
            "TF_CONFIG is not valid JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1))",
        ),
        ("[1]", "TF_CONFIG: expected a JSON object, got [1]"),
        (" ", "TF_CONFIG is empty or not set: expected a JSON object"),
        (
            '{"task": {"type": "worker"}}',
            'TF_CONFIG: cluster: missing (expected {"<role>": ["host:port", ...], ...})',
        ),
        (
            '{"cluster": []}',
            'TF_CONFIG: cluster: expected an object of role to "host:port" list, got []',
        ),
        (
            '{"cluster": {"worker": "w0:2222"}}',
            'TF_CONFIG: cluster.worker: expected a list of "host:port" (or an object), '
            'got "w0:2222"',
        ),
        (
            '{"cluster": {"worker": ["w0:2222", 7]}}',
            'TF_CONFIG: cluster.worker[1]: expected "host:port", got 7',
        ),
        (
            '{"cluster": {"worker": ["w0:2222", "w1"]}}',
            'TF_CONFIG: cluster.worker[1] "w1": expected host:port',
        ),
        (
            '{"cluster": {"worker": {"a": "w0:2222"}}}',
            'TF_CONFIG: cluster.worker: key "a" is not a task index',
        ),
        (
            '{"cluster": {"worker": {"1": "w1"}}}',
            'TF_CONFIG: cluster.worker["1"] "w1": expected host:port',
        ),
        (
            '{"cluster": {"worker": {"1": "w0:1", "01": "w1:1"}}}',
            'TF_CONFIG: cluster.worker: keys "1" and "01" are one task index',
        ),
        (
            '{"cluster": {"worker": ["w0:1", "W0:1"]}}',
            "TF_CONFIG: cluster.worker[0] and cluster.worker[1] are both at W0:1",
        ),
        (
            '{"cluster": {"master": ["m:1"], "worker": {"3": "m:1"}}}',
            'TF_CONFIG: cluster.master[0] and cluster.worker["3"] are both at m:1',
        ),
        (
            '{"cluster": {"worker": ["w0:1"]}, "task": {"type": "worker", "index": '
            + "9" * 5000
            + "}}",
            "TF_CONFIG: task.index: an integer of 5000 digits (at most 4300)",
        ),
        (
            '{"cluster": {"chief": ["c:1"], "master": ["m:1"]}}',
            "TF_CONFIG: cluster: has both chief and master (the legacy name of chief)",
        ),
        (
            '{"cluster": {"worker": ["w0:1"]}}',
            'TF_CONFIG: task: expected {"type": "<role>", "index": <int>}, missing',
        ),
        (
            '{"cluster": {"worker": ["w0:1"]}, "task": "worker"}',
            'TF_CONFIG: task: expected {"type": "<role>", "index": <int>}, got "worker"',
        ),
        (
            '{"cluster": {"worker": ["w0:1"]}, "task": {"index": 0}}',
            "TF_CONFIG: task.type: expected a role name, got null",
        ),
        (
            '{"cluster": {"worker": ["w0:1"]}, "task": {"type": "worker", "index": -1}}',
            "TF_CONFIG: task.index: expected a non-negative integer, got -1",
        ),
        (
            '{"cluster": {"worker": ["w0:1"]}, "task": {"type": "worker", "index": true}}',
            "TF_CONFIG: task.index: expected a non-negative integer, got true",
        ),
        (
            '{"cluster": {"worker": ["w0:1"]}, "task": {"type": "ps", "index": 0}}',
            'TF_CONFIG: task.type: "ps" is not a role of cluster (worker)',
        ),
        (
            '{"cluster": {"worker": {"3": "w3:1"}}, "task": {"type": "worker", "index": 1}}',
            "TF_CONFIG: task.index: 1 is not listed in the sparse cluster.worker (indices: 3)",
        ),
        (
            '{"cluster": {"worker": ["w0:1"]}, "task": {"type": "worker"}, "environment": 1}',
            "TF_CONFIG: environment: expected a string, got 1",
        ),
    ],
)
def test_broken_tf_config(raw: str, message: str) -> None:
    with pytest.raises(TopologyError) as info:
        tf_config.resolve({"TF_CONFIG": raw}, OPTIONS)
    assert str(info.value) == message


def test_task_index_out_of_range() -> None:
    config = {"cluster": GOOD_CLUSTER, "task": {"type": "worker", "index": 5}}
    with pytest.raises(TopologyError) as info:
        tf_config.resolve({"TF_CONFIG": json.dumps(config)}, OPTIONS)
    assert str(info.value) == "TF_CONFIG: task.index: 5 is out of range for worker (3 tasks)"
