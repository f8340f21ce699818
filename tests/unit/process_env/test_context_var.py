"""MALAUNCH_CONTEXT of real plans (real sources and plugins), read back by malaunch.context."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import pytest

from malaunch.context import Context, from_environ
from malaunch.models import (
    Device,
    LaunchPlan,
    Node,
    PlanOptions,
    ProcessSpec,
    ResolveOptions,
    Topology,
)
from malaunch.pipeline import build_plan
from malaunch.plugins import load_plugins
from malaunch.process_env.context_var import CONTEXT_VAR, agent, context_env
from malaunch.testing import read_env_file

FIXTURES = Path(__file__).parents[2] / "fixtures" / "shared"
OCTOPUS = read_env_file(FIXTURES / "octopus_env_example.env")


def make_plan(
    framework: str,
    environ: Mapping[str, str],
    *,
    source: str = "local",
    command: Sequence[str] = ("python", "train.py"),
    nproc: Optional[int] = None,
    framework_options: Optional[Dict[str, Any]] = None,
    conda_env: Optional[str] = None,
) -> LaunchPlan:
    return build_plan(
        load_plugins({}),
        environ,
        framework=framework,
        source=source,
        command=command,
        resolve_options=ResolveOptions(nproc_per_node=nproc, log_dir="logs"),
        plan_options=PlanOptions(
            log_dir="logs",
            cwd="/work",
            environ=dict(environ),
            framework_options=framework_options or {},
        ),
        conda_env=conda_env,
    )


def contexts(plan: LaunchPlan, environ: Mapping[str, str]) -> List[Context]:
    """What malaunch.context returns inside each process (launcher env + the plan's env)."""
    return [from_environ({**environ, **spec.env}) for spec in plan.processes]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # plugins put log and working directories under the cwd


def test_octopus_volcano_node_under_torch_ddp() -> None:
    plan = make_plan("torch_ddp", OCTOPUS, source="volcano", nproc=2)
    first, second = contexts(plan, OCTOPUS)
    assert [(c.rank, c.local_rank, c.device) for c in (first, second)] == [(2, 0, 0), (3, 1, 1)]
    for ctx in (first, second):
        assert (ctx.world_size, ctx.node_rank, ctx.nnodes, ctx.role) == (4, 1, 2, "worker")
        assert ctx.master_addr == OCTOPUS["VC_WORKER_HOSTS"].split(",")[0]
        assert ctx.master_port == 6060
        assert ctx.datasets == json.loads(OCTOPUS["DATASET_MAP"])
        assert ctx.dataset == "/home/ma-user/datasets"
        assert ctx.cached_dataset == "/home/ma-user/cached-datasets"
        assert ctx.result_dir == "/home/ma-user/modelarts/result"
        assert ctx.model_dir == "/home/ma-user/modelarts/user-job-dir/model"
        assert (ctx.framework, ctx.source) == ("torch_ddp", "volcano")
        assert ctx.job_id == plan.topology.job_id
        assert not ctx.is_main


def test_non_ascii_dataset_names_survive_as_ascii_json() -> None:
    environ = {"DATASET_MAP": json.dumps({"车道线数据": "/data/车道线"}, ensure_ascii=False)}
    plan = make_plan("torch_ddp", environ, nproc=1)
    raw = plan.processes[0].env[CONTEXT_VAR]
    assert raw.isascii()
    assert contexts(plan, environ)[0].datasets == {"车道线数据": "/data/车道线"}


def test_torch_ddp_delegate_workers_take_their_rank_from_torchrun() -> None:
    plan = make_plan(
        "torch_ddp",
        OCTOPUS,
        source="volcano",
        nproc=2,
        framework_options={"torch_mode": "delegate"},
    )
    (spec,) = plan.processes
    agent_env = {**OCTOPUS, **spec.env}
    assert json.loads(spec.env[CONTEXT_VAR])["agent"] == "torchrun"
    # What torchrun's agent adds for its second local worker.
    worker_env = {
        **agent_env, "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "GROUP_RANK": "1",
        "GROUP_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "6060",
        "TORCHELASTIC_RUN_ID": "none",
    }  # fmt: skip
    ctx = from_environ(worker_env)
    assert (ctx.rank, ctx.local_rank, ctx.device, ctx.world_size) == (3, 1, 1, 4)
    assert ctx.device_id == 1
    assert (ctx.role, ctx.source, ctx.framework) == ("worker", "volcano", "torch_ddp")
    assert ctx.datasets == json.loads(OCTOPUS["DATASET_MAP"])
    # The agent itself sees its own context (no torchrun variables in its environment).
    assert from_environ(agent_env).role == "torchrun"


def test_mindspore_dynamic_scheduler_and_workers() -> None:
    plan = make_plan("mindspore", {}, nproc=2, framework_options={"ms_mode": "dynamic"})
    by_role = {(c.role, c.rank): c for c in contexts(plan, {})}
    assert set(by_role) == {("scheduler", None), ("worker", 0), ("worker", 1)}
    port = int(plan.processes[0].env["MS_SCHED_PORT"])
    for ctx in by_role.values():
        assert (ctx.world_size, ctx.master_addr, ctx.master_port) == (2, "127.0.0.1", port)
    assert by_role[("scheduler", None)].device is None
    assert by_role[("worker", 1)].device == 1
    assert not by_role[("scheduler", None)].is_main and by_role[("worker", 0)].is_main


def test_tensorflow_ps_local_cluster() -> None:
    plan = make_plan(
        "tensorflow_ps", {}, framework_options={"num_ps": 1, "num_workers": 2, "tf_flags": True}
    )
    found = sorted((c.role, c.rank, c.world_size) for c in contexts(plan, {}))
    assert found == [("ps", None, 2), ("worker", 0, 2), ("worker", 1, 2)]
    chief_host, _, chief_port = plan.topology.roles["worker"][0].rpartition(":")
    for ctx in contexts(plan, {}):
        assert (ctx.master_addr, ctx.master_port) == (chief_host, int(chief_port))


def test_tensorflow_ps_task_from_tf_config_source() -> None:
    tf_config = {
        "cluster": {"chief": ["c-0.j:2222"], "worker": ["w-0.j:2222", "w-1.j:2222"], "ps": ["p:1"]},
        "task": {"type": "worker", "index": 1},
    }
    environ = {"TF_CONFIG": json.dumps(tf_config)}
    plan = make_plan("tensorflow_ps", environ, source="tf-config")
    (ctx,) = contexts(plan, environ)
    assert (ctx.role, ctx.rank, ctx.world_size) == ("worker", 2, 3)
    assert (ctx.master_addr, ctx.master_port) == ("c-0.j", 2222)


def test_conda_reaches_every_process_of_a_delegate_plan(tmp_path: Path) -> None:
    prefix = tmp_path / "conda" / "envs" / "torch"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "bin" / "python").symlink_to(sys.executable)
    environ = {"ANACONDA_DIR": str(tmp_path / "conda"), "PATH": "/usr/bin"}
    plan = make_plan(
        "torch_ddp",
        environ,
        nproc=2,
        conda_env="torch",
        framework_options={"torch_mode": "delegate"},
    )
    (spec,) = plan.processes
    assert spec.argv[:3] == (str(prefix / "bin" / "python"), "-m", "torch.distributed.run")
    assert spec.env["PATH"] == f"{prefix}/bin:/usr/bin"
    assert spec.env["CONDA_DEFAULT_ENV"] == "torch"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["python", "-m", "torch.distributed.run", "t.py"], "torchrun"),
        (["/env/bin/python3", "-u", "-m", "torch.distributed.launch", "t.py"], "torchrun"),
        (["/usr/bin/torchrun", "--nproc-per-node", "2", "t.py"], "torchrun"),
        (["python", "-m", "mypkg.train"], None),
        (["python", "train.py", "-m", "torch.distributed.run"], None),
        ([], None),
    ],
)
def test_agent_detection(argv: List[str], expected: Optional[str]) -> None:
    assert agent(argv) == expected


def test_a_spec_without_rank_or_device_in_a_bare_topology() -> None:
    plan = make_plan("torch_ddp", {}, nproc=1)
    spec = ProcessSpec(role="helper", argv=("sleep", "1"), cwd="/", log_file="/tmp/x.log")
    payload = json.loads(context_env(plan.topology, spec, "custom")[CONTEXT_VAR])
    assert payload["rank"] is None and payload["device"] is None and payload["agent"] is None
    assert (payload["world_size"], payload["framework"], payload["role"]) == (1, "custom", "helper")


def test_the_context_follows_user_env_overrides() -> None:
    plugins = load_plugins({})
    plan = build_plan(
        plugins,
        {},
        framework="torch_ddp",
        source="local",
        command=["python", "t.py"],
        resolve_options=ResolveOptions(nproc_per_node=1, log_dir="logs"),
        plan_options=PlanOptions(log_dir="logs", cwd="/work"),
        extra_env={"MASTER_ADDR": "10.9.9.9", "MASTER_PORT": "2345"},
    )
    (spec,) = plan.processes
    ctx = from_environ(spec.env)
    assert (ctx.master_addr, ctx.master_port) == ("10.9.9.9", 2345)
    assert spec.env["MASTER_ADDR"] == "10.9.9.9"


def test_delegate_workers_map_local_rank_to_the_devices_in_rank_order() -> None:
    """A rank-table node whose ranks do not follow its device order: NPU 5 holds rank 4."""
    devices = (
        Device(rank=5, local_index=0, device_id=4),
        Device(rank=4, local_index=1, device_id=5),
    )
    topology = Topology(
        source="ranktable",
        nodes=(
            Node(index=0, host="192.0.2.1", devices=()),
            Node(index=1, host="192.0.2.2", devices=devices),
        ),
        node_rank=1,
        master_addr="192.0.2.1",
    )
    spec = ProcessSpec(
        role="torchrun", rank=4, local_rank=0, cwd="/", log_file="/tmp/t.log",
        argv=("python", "-m", "torch.distributed.run", "--nproc-per-node", "2", "t.py"),
    )  # fmt: skip
    agent_env = context_env(topology, spec, "torch_ddp")
    first = from_environ({**agent_env, "RANK": "4", "LOCAL_RANK": "0", "WORLD_SIZE": "2"})
    second = from_environ({**agent_env, "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "2"})
    assert (first.device, first.device_id) == (1, 5)
    assert (second.device, second.device_id) == (0, 4)
    broken = json.loads(agent_env[CONTEXT_VAR])
    broken["local_devices"] = [["x", 1], [0, 4]]
    with pytest.raises(ValueError, match="local_devices"):
        from_environ(
            {CONTEXT_VAR: json.dumps(broken), "RANK": "4", "LOCAL_RANK": "0", "WORLD_SIZE": "2"}
        )
