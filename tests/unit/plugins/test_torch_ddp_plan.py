"""The torch_ddp plan: torchrun's per-rank environment (native) and torchrun itself (delegate)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from malaunch.errors import UsageError
from malaunch.testing import PlanFactory, make_rank_table_topology, make_topology


def test_native_env_matches_torchrun(
    malaunch_plan: PlanFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    topology = make_topology(nodes=2, nproc_per_node=2, node_rank=1)
    plan = malaunch_plan("torch_ddp", topology, ["python", "train.py", "--lr", "0.1"])
    assert [(p.role, p.rank, p.local_rank) for p in plan.processes] == [
        ("worker", 2, 0),
        ("worker", 3, 1),
    ]
    for local_rank, process in enumerate(plan.processes):
        rank = str(2 + local_rank)
        assert process.env == {
            "RANK": rank,
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": "4",
            "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "1",
            "NODE_RANK": "1",
            "GROUP_WORLD_SIZE": "2",
            "ROLE_NAME": "default",
            "ROLE_RANK": rank,
            "ROLE_WORLD_SIZE": "4",
            "MASTER_ADDR": "192.0.2.11",
            "MASTER_PORT": "29500",
            "OMP_NUM_THREADS": "1",
            "TORCHELASTIC_RUN_ID": "none",
            "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_MAX_RESTARTS": "0",
            "TORCHELASTIC_USE_AGENT_STORE": "False",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
            "TORCHELASTIC_ERROR_FILE": str(tmp_path / "logs" / f"worker-{rank}.error.json"),
        }
        assert process.argv == ("python", "train.py", "--lr", "0.1")
        assert process.cwd == str(tmp_path)
        assert process.log_file == str(tmp_path / "logs" / f"worker-{rank}.log")
        assert process.error_file == process.env["TORCHELASTIC_ERROR_FILE"]
        assert process.attempt_env == ("TORCHELASTIC_RESTART_COUNT",)
        assert not process.service


def test_torchelastic_run_id_is_the_job_id_and_max_restarts_the_option(
    malaunch_plan: PlanFactory,
) -> None:
    topology = make_topology(nodes=1, nproc_per_node=2, job_id="modelarts-job-42")
    plan = malaunch_plan("torch_ddp", topology, max_restarts=3)
    assert {p.env["TORCHELASTIC_RUN_ID"] for p in plan.processes} == {"modelarts-job-42"}
    assert {p.env["TORCHELASTIC_MAX_RESTARTS"] for p in plan.processes} == {"3"}


def test_nccl_async_error_handling_only_when_unset(malaunch_plan: PlanFactory) -> None:
    topology = make_topology(nodes=1, nproc_per_node=2)
    preset = malaunch_plan("torch_ddp", topology, environ={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"})
    assert all("TORCH_NCCL_ASYNC_ERROR_HANDLING" not in p.env for p in preset.processes)


def test_omp_threads_only_when_unset_and_several_processes(malaunch_plan: PlanFactory) -> None:
    single = malaunch_plan("torch_ddp", make_topology(nodes=1, nproc_per_node=1))
    assert "OMP_NUM_THREADS" not in single.processes[0].env
    preset = malaunch_plan(
        "torch_ddp", make_topology(nodes=1, nproc_per_node=2), environ={"OMP_NUM_THREADS": "4"}
    )
    assert all("OMP_NUM_THREADS" not in p.env for p in preset.processes)


def test_master_port_from_topology(malaunch_plan: PlanFactory) -> None:
    topology = make_topology(nodes=1, nproc_per_node=2, master_port=41000)
    plan = malaunch_plan("torch_ddp", topology)
    assert {(p.env["MASTER_ADDR"], p.env["MASTER_PORT"]) for p in plan.processes} == {
        ("127.0.0.1", "41000")
    }


def test_rank_table_gives_each_rank_its_device(malaunch_plan: PlanFactory) -> None:
    topology = make_rank_table_topology(servers=2, devices_per_server=4, node_rank=1,
                                        device_ids=[3, 2, 1, 0])  # fmt: skip
    plan = malaunch_plan("torch_ddp", topology)
    got = [(p.env["RANK"], p.env["LOCAL_RANK"], p.env["DEVICE_ID"]) for p in plan.processes]
    assert got == [("4", "0", "3"), ("5", "1", "2"), ("6", "2", "1"), ("7", "3", "0")]
    assert all(p.env["ASCEND_DEVICE_ID"] == p.env["DEVICE_ID"] for p in plan.processes)
    assert all("RANK_TABLE_FILE" not in p.env for p in plan.processes)
    exported = malaunch_plan("torch_ddp", topology, export_rank_table=True)
    assert {p.env["RANK_TABLE_FILE"] for p in exported.processes} == {
        "/home/ma-user/rank_table/jobstart_hccl.json"
    }


def test_no_device_ids_without_a_rank_table(malaunch_plan: PlanFactory) -> None:
    plan = malaunch_plan("torch_ddp", make_topology(nodes=1, nproc_per_node=2))
    assert all("DEVICE_ID" not in p.env for p in plan.processes)


def _delegate(malaunch_plan: PlanFactory, command: list[str], **kwargs: object) -> tuple[str, ...]:
    topology = make_topology(nodes=2, nproc_per_node=4, node_rank=1, master_port=29400)
    plan = malaunch_plan("torch_ddp", topology, command, torch_mode="delegate", **kwargs)
    (process,) = plan.processes
    assert (process.role, process.rank, process.local_rank) == ("torchrun", 4, 0)
    return process.argv


TORCHRUN = (
    "-m", "torch.distributed.run", "--nproc-per-node", "4", "--nnodes", "2", "--node-rank", "1",
    "--master-addr", "192.0.2.11", "--master-port", "29400",
)  # fmt: skip


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["python", "train.py", "--lr", "1"], ("python", *TORCHRUN, "train.py", "--lr", "1")),
        (["python3", "-u", "-m", "pkg.main", "x"], ("python3", *TORCHRUN, "-m", "pkg.main", "x")),
        (["python", "-mpkg"], ("python", *TORCHRUN, "-m", "pkg")),
        (
            ["/opt/env/bin/python3.11", "-W", "ignore", "train.py"],
            ("/opt/env/bin/python3.11", *TORCHRUN, "train.py"),
        ),
        (
            ["bash", "run.sh", "a"],
            (sys.executable, *TORCHRUN, "--no-python", "bash", "run.sh", "a"),
        ),
    ],
)
def test_delegate_argv(
    command: list[str], expected: tuple[str, ...], malaunch_plan: PlanFactory
) -> None:
    assert _delegate(malaunch_plan, command) == expected


def test_delegate_process_env_and_log(malaunch_plan: PlanFactory, tmp_path: Path) -> None:
    topology = make_rank_table_topology(servers=2, devices_per_server=2)
    plan = malaunch_plan("torch_ddp", topology, torch_mode="delegate", export_rank_table=True)
    (process,) = plan.processes
    # torchrun's own @record copies its first failed worker's error into this file
    error_file = str(tmp_path / "logs" / "torchrun-node-0.error.json")
    assert process.env == {
        "RANK_TABLE_FILE": "/home/ma-user/rank_table/jobstart_hccl.json",
        "TORCHELASTIC_ERROR_FILE": error_file,
    }
    assert process.error_file == error_file
    assert process.attempt_env == ()
    assert process.log_file == str(tmp_path / "logs" / "torchrun-node-0.log")
    assert process.argv[:3] == ("python", "-m", "torch.distributed.run")


@pytest.mark.parametrize("command", [["python", "-c", "print(1)"], ["python"], ["python", "-m"]])
def test_delegate_needs_a_script_or_module(command: list[str], malaunch_plan: PlanFactory) -> None:
    with pytest.raises(UsageError, match=r"expected `python \[options\] script\.py \.\.\.`"):
        _delegate(malaunch_plan, command)


def test_delegate_refuses_ranks_torchrun_would_number_differently(
    malaunch_plan: PlanFactory,
) -> None:
    uneven = make_topology(nodes=2, nproc_per_node=2, node_rank=1)
    nodes = (
        uneven.nodes[0],
        uneven.nodes[1].model_copy(update={"devices": uneven.nodes[1].devices[:1]}),
    )
    with pytest.raises(UsageError, match=r"gives node 1 ranks \[2\]; use --torch-mode native"):
        malaunch_plan(
            "torch_ddp", uneven.model_copy(update={"nodes": nodes}), torch_mode="delegate"
        )


def test_bad_mode_and_empty_command(malaunch_plan: PlanFactory) -> None:
    topology = make_topology(nodes=1)
    with pytest.raises(
        UsageError, match=r"--torch-mode 'elastic': expected one of native, delegate"
    ):
        malaunch_plan("torch_ddp", topology, torch_mode="elastic")
    with pytest.raises(UsageError, match="torch_ddp: no command given"):
        malaunch_plan("torch_ddp", topology, [])
    with pytest.raises(UsageError, match=r"lists no devices on node 0.*--nproc-per-node"):
        malaunch_plan("torch_ddp", make_topology(nodes=1, nproc_per_node=0))
