"""The paddle plugin's own tests, written with malaunch's test kit (malaunch.testing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from malaunch_paddle import plan as paddle

from malaunch.api import UsageError
from malaunch.testing import PlanFactory, clean_env, make_topology, run_cli


def test_trainers_get_the_whole_jobs_endpoints(malaunch_plan: PlanFactory) -> None:
    topology = make_topology(nodes=2, nproc_per_node=2, node_rank=1)
    plan = malaunch_plan("paddle", topology)  # the start port is the option's default, 6170
    endpoints = "192.0.2.11:6170,192.0.2.11:6171,192.0.2.12:6170,192.0.2.12:6171"
    assert [p.env for p in plan.processes] == [
        {
            "PADDLE_TRAINER_ID": str(rank),
            "PADDLE_TRAINERS_NUM": "4",
            "PADDLE_TRAINER_ENDPOINTS": endpoints,
            "PADDLE_CURRENT_ENDPOINT": f"192.0.2.12:{6170 + local}",
            "PADDLE_RANK_IN_NODE": str(local),
            "FLAGS_selected_gpus": str(local),
        }
        for local, rank in enumerate((2, 3))
    ]


def test_ports_start_where_asked(malaunch_plan: PlanFactory) -> None:
    plan = malaunch_plan("paddle", make_topology(nodes=1), paddle_start_port=7000)
    assert [p.env["PADDLE_CURRENT_ENDPOINT"] for p in plan.processes] == [
        "127.0.0.1:7000",
        "127.0.0.1:7001",
    ]


def test_node_0s_range_must_leave_the_job_port(malaunch_plan: PlanFactory) -> None:
    topology = make_topology(nodes=2, nproc_per_node=4, node_rank=1)
    with pytest.raises(UsageError) as info:
        malaunch_plan("paddle", topology, job_port=6172)
    assert str(info.value) == (
        "--paddle-start-port 6170: the trainers of node 0 would listen on ports 6170-6173, "
        "which hold the job port 6172 (node 0's launcher serves the job channel there); give "
        "--paddle-start-port 6173, or a --job-port outside 6170-6173"
    )
    malaunch_plan("paddle", topology, job_port=6174)  # just past the range
    malaunch_plan("paddle", topology, job_port=6172, paddle_start_port=6173)


def test_a_range_past_the_last_port_is_refused(malaunch_plan: PlanFactory) -> None:
    with pytest.raises(UsageError, match=r"would listen up to port 65537, past 65535$"):
        malaunch_plan("paddle", make_topology(nodes=1, nproc_per_node=4), paddle_start_port=65534)


def test_refused_through_the_command_line(tmp_path: Path) -> None:
    # Volcano's variables describe 2 nodes: there is a job channel, on port 6171 here.
    volcano = {"VC_WORKER_HOSTS": "192.0.2.11,192.0.2.12", "VC_TASK_INDEX": "1"}
    args = ["--framework", "paddle", "--nproc-per-node", "2", "--job-port", "6171"]
    result = run_cli([*args, "--dry-run", "--", "python", "x.py"], env=clean_env(volcano))
    assert result.code == 64
    assert result.stderr.startswith("malaunch: error: --paddle-start-port 6170: the trainers of")
    result = run_cli([*args, "--paddle-start-port", "6172", "--dry-run", "--", "python", "x.py"],
                     env=clean_env(volcano))  # fmt: skip
    assert result.code == 0, result.stderr
    ranks = [p["env"]["PADDLE_TRAINER_ID"] for p in json.loads(result.stdout)["processes"]]
    assert ranks == ["2", "3"]


def test_a_launch_inside_a_trainer_is_refused() -> None:
    trainer = {name: "1" for name in paddle.LAUNCHER_VARS[:2]}
    result = run_cli(["--framework", "paddle", "--dry-run", "--", "true"], env=clean_env(trainer))
    assert result.code == 65
    assert result.stderr == (
        "malaunch: error: nested launch: PADDLE_TRAINER_ID and PADDLE_TRAINERS_NUM are set, so "
        "this runs inside a paddle.distributed.launch worker (framework paddle) that already "
        "has its rank; run the command itself there, or start a separate job on purpose with "
        "--topology local\n"
    )


def test_clean_env_keeps_a_developers_paddle_variables_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PADDLE_TRAINER_ID", "3")
    monkeypatch.setenv("PADDLE_XCCL_BACKEND", "gloo")
    assert not [name for name in clean_env() if name.startswith("PADDLE_")]
