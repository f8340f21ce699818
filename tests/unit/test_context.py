"""malaunch.context: MALAUNCH_CONTEXT, the other launchers' variables, and the defaults."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from malaunch import context
from malaunch.context import FIELDS, Context, from_environ
from malaunch.testing import clean_env, read_env_file

SHARED = Path(__file__).parents[1] / "fixtures" / "shared"


def test_defaults_describe_a_single_process() -> None:
    ctx = from_environ({})
    assert ctx == Context()
    assert (ctx.rank, ctx.local_rank, ctx.world_size, ctx.role) == (0, 0, 1, "worker")
    assert ctx.is_main
    assert ctx.datasets == {}
    assert ctx.source == "default"


def test_malaunch_context_is_read_as_is() -> None:
    payload: Dict[str, Any] = {
        "rank": 3,
        "local_rank": 1,
        "world_size": 4,
        "node_rank": 1,
        "nnodes": 2,
        "role": "worker",
        "device": 1,
        "device_id": 5,
        "master_addr": "10.0.0.1",
        "master_port": 29500,
        "job_id": "job-1",
        "datasets": {"训练集": "/data/a"},
        "dataset": "/data",
        "cached_dataset": None,
        "result_dir": "/r",
        "model_dir": "/m",
        "framework": "torch_ddp",
        "source": "volcano",
        "some_future_key": [1],
    }
    env = {"MALAUNCH_CONTEXT": json.dumps(payload), "MALAUNCH_RESTART_COUNT": "2", "RANK": "9"}
    ctx = from_environ(env)
    assert ctx.rank == 3 and ctx.world_size == 4 and ctx.node_rank == 1 and ctx.nnodes == 2
    assert (ctx.device, ctx.device_id) == (1, 5)
    assert (ctx.master_addr, ctx.master_port) == ("10.0.0.1", 29500)
    assert ctx.datasets == {"训练集": "/data/a"}
    assert (ctx.result_dir, ctx.model_dir, ctx.framework) == ("/r", "/m", "torch_ddp")
    assert ctx.restart_count == 2
    assert not ctx.is_main


def test_service_process_has_no_rank() -> None:
    raw = json.dumps({"rank": None, "local_rank": None, "role": "ps", "world_size": 2})
    ctx = from_environ({"MALAUNCH_CONTEXT": raw})
    assert ctx.rank is None and ctx.role == "ps"
    assert not ctx.is_main


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"rank": "0"}', "field 'rank' has '0', expected int"),
        ('{"world_size": null}', "field 'world_size' has None, expected int"),
        ('{"rank": true}', "field 'rank' has True, expected int"),
        ('{"datasets": {"a": 1}}', "field 'datasets' has {'a': 1}, expected dict"),
    ],
)
def test_malformed_context_names_the_variable(raw: str, expected: str) -> None:
    with pytest.raises(ValueError, match="MALAUNCH_CONTEXT") as info:
        from_environ({"MALAUNCH_CONTEXT": raw})
    assert expected in str(info.value)


def test_torchrun_worker_fixture() -> None:
    """The shared fixture: local worker 3 on node 1 of a 2 x 8 torchrun job."""
    env = read_env_file(SHARED / "torchrun_worker_env.env")
    ctx = from_environ(env)
    assert (ctx.rank, ctx.local_rank, ctx.world_size) == (11, 3, 16)
    assert (ctx.node_rank, ctx.nnodes) == (1, 2)
    assert (ctx.master_addr, ctx.master_port, ctx.source) == ("192.0.2.21", 29500, "torchrun")
    assert not ctx.is_main


def test_torchrun_variables() -> None:
    env = {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "GROUP_RANK": "2",
        "GROUP_WORLD_SIZE": "4",
        "MASTER_ADDR": "node-0",
        "MASTER_PORT": "29500",
    }
    ctx = from_environ(env)
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.device) == (5, 8, 1, 1)
    assert (ctx.node_rank, ctx.nnodes) == (2, 4)
    assert (ctx.master_addr, ctx.master_port, ctx.source) == ("node-0", 29500, "torchrun")


def test_local_rank_list_of_an_operator_is_not_a_local_rank() -> None:
    ctx = from_environ({"RANK": "1", "WORLD_SIZE": "16", "LOCAL_RANK": "0,1,2,3,4,5,6,7"})
    assert ctx.rank == 1
    assert ctx.local_rank is None


def test_ascend_script_variables() -> None:
    ctx = from_environ({"RANK_ID": "9", "RANK_SIZE": "16", "DEVICE_ID": "1", "JOB_ID": "j"})
    assert (ctx.rank, ctx.world_size, ctx.device, ctx.local_rank) == (9, 16, 1, 1)
    assert (ctx.job_id, ctx.source) == ("j", "ascend")


@pytest.mark.parametrize(
    ("role", "expected_role", "expected_rank"),
    [("MS_WORKER", "worker", 3), ("MS_SCHED", "scheduler", None)],
)
def test_msrun_variables(role: str, expected_role: str, expected_rank: Any) -> None:
    env = {
        "MS_ROLE": role,
        "MS_NODE_ID": "3",
        "MS_WORKER_NUM": "4",
        "MS_SCHED_HOST": "10.1.1.1",
        "MS_SCHED_PORT": "8118",
    }
    ctx = from_environ(env)
    assert (ctx.role, ctx.rank, ctx.world_size) == (expected_role, expected_rank, 4)
    assert (ctx.master_addr, ctx.master_port, ctx.source) == ("10.1.1.1", 8118, "msrun")


def test_tf_config_worker_counts_the_chief_first() -> None:
    tf_config = {
        "cluster": {
            "chief": ["c:2222"],
            "worker": ["w0:2222", "w1:2222"],
            "ps": ["p0:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    ctx = from_environ({"TF_CONFIG": json.dumps(tf_config)})
    assert (ctx.role, ctx.rank, ctx.world_size) == ("worker", 2, 3)
    assert (ctx.master_addr, ctx.master_port, ctx.source) == ("c", 2222, "tf_config")


def test_tf_config_ps_task_and_sparse_worker_form() -> None:
    ps = {"cluster": {"worker": ["w0:1", "w1:1"], "ps": ["p:2"]}, "task": {"type": "ps"}}
    ctx = from_environ({"TF_CONFIG": json.dumps(ps)})
    assert (ctx.role, ctx.rank, ctx.world_size) == ("ps", None, 2)
    sparse = {
        "cluster": {"worker": {"3": "w3:1"}, "ps": ["p:2"]},
        "task": {"type": "worker", "index": 3},
    }
    ctx = from_environ({"TF_CONFIG": json.dumps(sparse)})
    assert (ctx.rank, ctx.world_size, ctx.master_addr) == (3, 4, "w3")


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"TF_CONFIG": "{"}, "TF_CONFIG"),
        ({"TF_CONFIG": '{"cluster": {}}'}, "TF_CONFIG"),
        ({"RANK": "one", "WORLD_SIZE": "2"}, "RANK"),
        ({"DATASET_MAP": "['a']"}, "DATASET_MAP"),
        ({"DATASET_MAP": '["/a"]'}, "DATASET_MAP"),
    ],
)
def test_malformed_fallback_variables_name_the_variable(env: Dict[str, str], variable: str) -> None:
    with pytest.raises(ValueError, match=f"environment variable {variable}:"):
        from_environ(env)


def test_data_variables_without_malaunch() -> None:
    env = {
        "DATASET_MAP": '{"车道线": "/home/ma-user/datasets/dataset-0"}',
        "DATASET": "/home/ma-user/datasets",
        "CACHED_DATASET": "/home/ma-user/cached-datasets",
        "RESULT": "/home/ma-user/modelarts/result",
        "MODEL": "/home/ma-user/modelarts/user-job-dir/model",
    }
    ctx = from_environ(env)
    assert ctx.datasets == {"车道线": "/home/ma-user/datasets/dataset-0"}
    assert ctx.dataset == "/home/ma-user/datasets"
    assert ctx.cached_dataset == "/home/ma-user/cached-datasets"
    assert ctx.result_dir == "/home/ma-user/modelarts/result"
    assert ctx.model_dir == "/home/ma-user/modelarts/user-job-dir/model"


def test_module_attributes_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MALAUNCH_CONTEXT", "RANK", "WORLD_SIZE", "MS_ROLE", "RANK_ID", "TF_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    assert context.rank == 0 and context.is_main
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert (context.rank, context.world_size, context.is_main) == (2, 4, False)
    monkeypatch.setenv("MALAUNCH_CONTEXT", json.dumps({"rank": 0, "world_size": 2, "role": "w"}))
    assert (context.rank, context.world_size, context.role) == (0, 2, "w")
    assert context.current().as_dict()["is_main"] is True
    assert "rank" in dir(context)
    with pytest.raises(AttributeError, match="no attribute 'ranks'"):
        _ = context.ranks


def test_from_import_of_an_attribute_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALAUNCH_CONTEXT", json.dumps({"rank": 7, "world_size": 8}))
    from malaunch.context import rank, world_size  # noqa: PLC0415 (the point of the test)

    assert (rank, world_size) == (7, 8)


def test_import_is_standard_library_only() -> None:
    code = (
        "import sys, malaunch.context\n"
        "heavy = ('pydantic', 'click', 'loguru', 'pluggy')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy"
        " or m.startswith('malaunch.') and m != 'malaunch.context'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == "[]"


def test_context_is_immutable_and_its_fields_match_the_table() -> None:
    ctx = Context(rank=2, datasets={"a": "/a"})
    with pytest.raises(AttributeError, match="immutable"):
        ctx.rank = 3
    with pytest.raises(TypeError, match="no field 'ranks'"):
        Context(ranks=1)
    assert list(Context.__annotations__) == list(FIELDS)
    assert ctx == Context(rank=2, datasets={"a": "/a"}) != Context(rank=1)
    assert repr(ctx).startswith("Context(rank=2, local_rank=0, world_size=1,")
    # The default dataset map is not shared between instances.
    assert Context().datasets is not Context().datasets
