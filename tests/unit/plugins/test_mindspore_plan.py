"""The mindspore plan: rank-table mode and dynamic-cluster mode, on builder topologies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malaunch.errors import UsageError
from malaunch.models import ResolveOptions, Topology
from malaunch.testing import PlanFactory, make_rank_table_topology, make_topology, read_env_file
from malaunch.topology import mindx
from malaunch_mindspore.plan import job_id

TABLE = "/home/ma-user/rank_table/jobstart_hccl.json"
SHARED = Path(__file__).parents[2] / "fixtures" / "shared"


def test_rank_table_mode_env_of_every_process(malaunch_plan: PlanFactory, tmp_path: Path) -> None:
    topology = make_rank_table_topology(servers=2, devices_per_server=8, node_rank=1, job_id="j1")
    plan = malaunch_plan("mindspore", topology)
    logs = tmp_path / "logs"
    assert [p.rank for p in plan.processes] == list(range(8, 16))
    for i, process in enumerate(plan.processes):
        rank = 8 + i
        assert process.env == {
            "RANK_TABLE_FILE": TABLE,
            "RANK_ID": str(rank),
            "RANK_SIZE": "16",
            "RANK_START": "8",
            "DEVICE_ID": str(i),
            "ASCEND_DEVICE_ID": str(i),
            "JOB_ID": "j1",
            "HCCL_CONNECT_TIMEOUT": "1800",
            "ASCEND_PROCESS_LOG_PATH": str(logs / "j1" / "ascend" / "process_log" / f"rank_{rank}"),
        }
        assert process.local_rank == i
        assert process.role == "worker"
        assert not process.service
        # The plan does no I/O: the supervisor creates the Ascend log directory it names.
        assert process.dirs == (process.env["ASCEND_PROCESS_LOG_PATH"],)
        assert process.cwd == str(logs / "workspace" / f"device{i}")
        assert process.log_file == str(logs / f"j1-proc-rank-{rank}-device-{i}.txt")
        assert process.argv == ("python", "train.py")


def test_modelarts_workspace_and_job_id(malaunch_plan: PlanFactory, tmp_path: Path) -> None:
    environ = {"MA_MOUNT_PATH": "/home/ma-user/modelarts"}
    # The source turned MA_VJ_NAME=ma-job-0d3c into ModelArts' spelling of the job id.
    topology = make_rank_table_topology(
        servers=1, devices_per_server=2, job_id="modelarts-job-0d3c"
    )
    plan = malaunch_plan("mindspore", topology, environ=environ)
    assert [p.cwd for p in plan.processes] == [
        "/home/ma-user/modelarts/workspace/device0",
        "/home/ma-user/modelarts/workspace/device1",
    ]
    assert {p.env["JOB_ID"] for p in plan.processes} == {"modelarts-job-0d3c"}
    assert plan.processes[1].log_file == str(
        tmp_path / "logs" / "modelarts-job-0d3c-proc-rank-1-device-1.txt"
    )


def test_values_already_set_are_left_alone(malaunch_plan: PlanFactory, tmp_path: Path) -> None:
    environ = {
        "HCCL_CONNECT_TIMEOUT": "600",
        "ASCEND_PROCESS_LOG_PATH": "/var/log/npu",
        "JOB_ID": "mine",
    }
    plan = malaunch_plan(
        "mindspore", make_rank_table_topology(servers=1, devices_per_server=2), environ=environ
    )
    for process in plan.processes:
        assert not {"HCCL_CONNECT_TIMEOUT", "ASCEND_PROCESS_LOG_PATH", "JOB_ID"} & set(process.env)
        assert process.dirs == ()
    assert plan.processes[0].log_file == str(tmp_path / "logs" / "mine-proc-rank-0-device-0.txt")


def test_device_id_is_the_in_container_index_not_the_physical_id(
    malaunch_plan: PlanFactory,
) -> None:
    # Table order 5, 4 on a server holding physical NPUs 4 and 5: rank 0 owns NPU 5, which
    # is index 1 in the container's ascending device list.
    topology = make_rank_table_topology(servers=2, devices_per_server=2, device_ids=[5, 4])
    plan = malaunch_plan("mindspore", topology)
    pairs = [
        (p.env["RANK_ID"], p.env["DEVICE_ID"], p.env["ASCEND_DEVICE_ID"]) for p in plan.processes
    ]
    assert pairs == [("0", "1", "1"), ("1", "0", "0")]
    assert [p.cwd.rsplit("/", 1)[1] for p in plan.processes] == ["device1", "device0"]
    assert [p.local_rank for p in plan.processes] == [0, 1]


def test_generated_job_id_is_stable_and_shared_by_all_nodes() -> None:
    first = job_id(make_rank_table_topology(node_rank=0), {})
    second = job_id(make_rank_table_topology(node_rank=1), {})
    assert first == second
    assert first.startswith("malaunch-")
    other = job_id(make_rank_table_topology(node_rank=0, master_addr="192.0.2.99"), {})
    assert other != first


def test_job_id_precedence() -> None:
    topology = make_rank_table_topology(job_id="modelarts-job-topo")
    assert job_id(topology, {"JOB_ID": "ma-job-explicit"}) == "ma-job-explicit"
    # The platform's variables are the source's business (malaunch.topology.envparse.job_id).
    assert job_id(topology, {"MA_VJ_NAME": "ma-job-env"}) == "modelarts-job-topo"
    generated = job_id(make_rank_table_topology(), {"MA_VJ_NAME": "ma-job-env"})
    assert generated.startswith("malaunch-")


def test_relative_script_is_made_absolute_for_the_device_dirs(
    malaunch_plan: PlanFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    topology = make_rank_table_topology(servers=1, devices_per_server=1)
    plan = malaunch_plan("mindspore", topology, ["python3", "-u", "train.py", "--data", "train.py"])
    assert plan.processes[0].argv == (
        "python3", "-u", str(tmp_path / "train.py"), "--data", "train.py",
    )  # fmt: skip
    assert "PYTHONPATH" not in plan.processes[0].env


@pytest.mark.parametrize(
    "command",
    [
        ["python", "missing.py"],
        ["python", "-c", "import train"],
        ["python", "-W", "train.py", "other.py"],  # train.py is the -W value here
        ["bash", "train.py"],
    ],
)
def test_other_arguments_are_untouched(
    command: list[str],
    malaunch_plan: PlanFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    topology = make_rank_table_topology(servers=1, devices_per_server=1)
    assert malaunch_plan("mindspore", topology, command).processes[0].argv == tuple(command)


def test_program_path_and_interpreter_option_values(
    malaunch_plan: PlanFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "run.sh").write_text("")
    (tmp_path / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    topology = make_rank_table_topology(servers=1, devices_per_server=1)
    plan = malaunch_plan("mindspore", topology, ["./run.sh", "train.py"])
    assert plan.processes[0].argv == (str(tmp_path / "./run.sh"), "train.py")
    plan = malaunch_plan("mindspore", topology, ["python", "-Xdev", "-W", "error", "train.py"])
    assert plan.processes[0].argv[-1] == str(tmp_path / "train.py")


def test_module_command_gets_the_launch_dir_on_pythonpath(
    malaunch_plan: PlanFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    topology = make_rank_table_topology(servers=1, devices_per_server=2)
    plan = malaunch_plan("mindspore", topology, ["python", "-m", "pkg.train"])
    assert {p.env["PYTHONPATH"] for p in plan.processes} == {str(tmp_path)}
    plan = malaunch_plan(
        "mindspore", topology, ["python", "-m", "pkg"], environ={"PYTHONPATH": "/opt/lib"}
    )
    assert plan.processes[0].env["PYTHONPATH"] == f"{tmp_path}:/opt/lib"


def test_dynamic_mode_on_node_0_has_a_scheduler(
    malaunch_plan: PlanFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    plan = malaunch_plan("mindspore", make_topology(nodes=2, nproc_per_node=2, node_rank=0))
    common = {
        "MS_SCHED_HOST": "192.0.2.11",
        "MS_SCHED_PORT": "8118",
        "MS_WORKER_NUM": "4",
        "MS_TOPO_TIMEOUT": "600",
        "RANK_SIZE": "4",
    }
    scheduler, *workers = plan.processes
    assert (scheduler.role, scheduler.rank, scheduler.local_rank) == ("scheduler", None, None)
    # Across nodes the scheduler must outlive node 0's workers: it is not a service there.
    assert not scheduler.service
    assert scheduler.env == {**common, "MS_ROLE": "MS_SCHED"}
    assert scheduler.log_file == str(tmp_path / "logs" / "scheduler.log")
    for i, worker in enumerate(workers):
        assert worker.env == {
            **common, "MS_ROLE": "MS_WORKER", "MS_NODE_ID": str(i), "DEVICE_ID": str(i),
        }  # fmt: skip
        assert (worker.role, worker.rank, worker.local_rank, worker.service) == (
            "worker", i, i, False,
        )  # fmt: skip
        assert worker.cwd == str(tmp_path)
        assert worker.log_file == str(tmp_path / "logs" / f"worker-{i}.log")
        assert worker.argv == ("python", "train.py")


def test_single_node_dynamic_scheduler_is_a_service(malaunch_plan: PlanFactory) -> None:
    plan = malaunch_plan("mindspore", make_topology(nodes=1, nproc_per_node=2))
    assert [(p.role, p.service) for p in plan.processes] == [
        ("scheduler", True),
        ("worker", False),
        ("worker", False),
    ]


def test_dynamic_mode_on_node_1_runs_only_workers(malaunch_plan: PlanFactory) -> None:
    topology = make_topology(nodes=2, nproc_per_node=2, node_rank=1, master_port=29400)
    plan = malaunch_plan("mindspore", topology)
    assert [(p.role, p.rank, p.env["MS_NODE_ID"]) for p in plan.processes] == [
        ("worker", 2, "2"),
        ("worker", 3, "3"),
    ]
    assert {p.env["MS_SCHED_PORT"] for p in plan.processes} == {"29400"}
    assert [p.env["DEVICE_ID"] for p in plan.processes] == ["0", "1"]


def test_dynamic_mode_options(malaunch_plan: PlanFactory) -> None:
    topology = make_topology(nodes=1, nproc_per_node=1, master_port=29400)
    plan = malaunch_plan("mindspore", topology, ms_sched_port=9000, ms_topo_timeout=60)
    assert {p.env["MS_SCHED_PORT"] for p in plan.processes} == {"9000"}
    assert {p.env["MS_TOPO_TIMEOUT"] for p in plan.processes} == {"60"}
    assert {p.env["MS_SCHED_HOST"] for p in plan.processes} == {"127.0.0.1"}


def test_mode_choice(malaunch_plan: PlanFactory) -> None:
    table = make_rank_table_topology(servers=1, devices_per_server=1)
    dynamic = malaunch_plan("mindspore", table, ms_mode="dynamic")
    assert [p.env["MS_ROLE"] for p in dynamic.processes] == ["MS_SCHED", "MS_WORKER"]
    assert "RANK_TABLE_FILE" not in dynamic.processes[1].env
    with pytest.raises(UsageError, match=r"--ms-mode ranktable: topology source 'local' gives no"):
        malaunch_plan("mindspore", make_topology(nodes=1), ms_mode="ranktable")
    with pytest.raises(UsageError, match=r"--ms-mode 'mpi': expected one of auto, ranktable"):
        malaunch_plan("mindspore", table, ms_mode="mpi")


def test_no_command_or_no_local_device_is_a_usage_error(malaunch_plan: PlanFactory) -> None:
    with pytest.raises(UsageError, match="mindspore: no command given"):
        malaunch_plan("mindspore", make_topology(nodes=1), [])
    no_devices = make_topology(nodes=1, nproc_per_node=0)
    with pytest.raises(UsageError, match=r"lists no devices on node 0 \(127.0.0.1\)"):
        malaunch_plan("mindspore", no_devices)


def test_plan_json_is_the_dry_run_contract(malaunch_plan: PlanFactory) -> None:
    plan = malaunch_plan("mindspore", make_rank_table_topology(servers=1, devices_per_server=1))
    dumped = json.loads(json.dumps(plan.to_json_dict()))
    assert dumped["framework"] == "mindspore"
    assert dumped["processes"][0]["env"]["RANK_ID"] == "0"


def _mindx_topology(**changes: str) -> Topology:
    env = read_env_file(SHARED / "mindx_operator_mindspore_env.env")
    env.update(changes)
    return mindx.resolve({k: v for k, v in env.items() if v}, ResolveOptions())


def test_mindx_worker_pod_runs_workers_only(malaunch_plan: PlanFactory) -> None:
    # The ascend-operator runs the scheduler in its own pod: none on any worker pod.
    for node_rank in ("0", "1"):
        plan = malaunch_plan("mindspore", _mindx_topology(MS_NODE_RANK=node_rank))
        first = int(node_rank) * 8
        assert [p.role for p in plan.processes] == ["worker"] * 8
        assert [p.env["MS_NODE_ID"] for p in plan.processes] == [str(first + i) for i in range(8)]
        for process in plan.processes:
            assert process.env["MS_ROLE"] == "MS_WORKER"
            assert process.env["MS_SCHED_HOST"] == "203.0.113.110"
            assert process.env["MS_SCHED_PORT"] == "2222"
            assert process.env["MS_WORKER_NUM"] == "16"
            assert not process.service


def test_mindx_scheduler_pod_runs_only_the_scheduler(
    malaunch_plan: PlanFactory, tmp_path: Path
) -> None:
    topology = _mindx_topology(MS_ROLE="MS_SCHED", MS_SCHED_HOST="203.0.113.5", MS_NODE_RANK="")
    plan = malaunch_plan("mindspore", topology)
    (scheduler,) = plan.processes
    assert (scheduler.role, scheduler.rank, scheduler.local_rank) == ("scheduler", None, None)
    # On its own pod the scheduler is the job: waited for, not stopped as a service.
    assert not scheduler.service
    assert scheduler.env == {
        "MS_ROLE": "MS_SCHED",
        "MS_SCHED_HOST": "203.0.113.5",
        "MS_SCHED_PORT": "2222",
        "MS_WORKER_NUM": "16",
        "MS_TOPO_TIMEOUT": "600",
        "RANK_SIZE": "16",
    }
    assert scheduler.log_file == str(tmp_path / "logs" / "scheduler.log")
    # A single worker pod does not make the scheduler pod's scheduler a service either.
    single = _mindx_topology(MS_ROLE="MS_SCHED", MS_WORKER_NUM="8", MS_NODE_RANK="")
    assert [(p.role, p.service) for p in malaunch_plan("mindspore", single).processes] == [
        ("scheduler", False)
    ]
