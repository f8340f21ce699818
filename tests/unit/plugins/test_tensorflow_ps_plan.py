"""The tensorflow_ps plan: this container's task, and a whole local cluster on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malaunch.errors import UsageError
from malaunch.testing import PlanFactory, make_ps_topology, make_topology

PS = "job-tf-ps-0.job-tf:2222,job-tf-ps-1.job-tf:2222"
WORKERS = "job-tf-worker-0.job-tf:2222,job-tf-worker-1.job-tf:2222,job-tf-worker-2.job-tf:2222"
CLUSTER = {"ps": PS.split(","), "worker": WORKERS.split(",")}


def test_worker_task_gets_flags_and_tf_config(
    malaunch_plan: PlanFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    plan = malaunch_plan("tensorflow_ps", make_ps_topology(role="worker", index=1))
    (process,) = plan.processes
    assert process.argv == (
        "python", "train.py", f"--ps_hosts={PS}", f"--worker_hosts={WORKERS}",
        "--job_name=worker", "--task_index=1",
    )  # fmt: skip
    assert process.env == {
        "TF_CONFIG": json.dumps(
            {"cluster": CLUSTER, "task": {"type": "worker", "index": 1}}, separators=(",", ":")
        )
    }
    assert (process.role, process.rank, process.local_rank, process.service) == (
        "worker", 1, 0, False,
    )  # fmt: skip
    assert process.cwd == str(tmp_path)
    assert process.log_file == str(tmp_path / "logs" / "worker-1.log")


def test_ps_task_is_a_service_the_job_stops(malaunch_plan: PlanFactory) -> None:
    # Its workers run on other nodes: the job channel stops it once they have succeeded.
    (process,) = malaunch_plan("tensorflow_ps", make_ps_topology(role="ps", index=0)).processes
    assert (process.role, process.rank, process.service) == ("ps", None, True)
    assert process.argv[-2:] == ("--job_name=ps", "--task_index=0")
    assert json.loads(process.env["TF_CONFIG"])["task"] == {"type": "ps", "index": 0}


def test_flags_can_be_turned_off(malaunch_plan: PlanFactory) -> None:
    plan = malaunch_plan("tensorflow_ps", make_ps_topology(), tf_flags=False)
    assert plan.processes[0].argv == ("python", "train.py")
    assert "TF_CONFIG" in plan.processes[0].env


def test_chief_counts_first(malaunch_plan: PlanFactory) -> None:
    topology = make_ps_topology(num_chief=1, role="worker", index=0)
    (process,) = malaunch_plan("tensorflow_ps", topology).processes
    assert process.rank == 1
    assert set(json.loads(process.env["TF_CONFIG"])["cluster"]) == {"chief", "ps", "worker"}


def test_local_cluster_on_loopback(malaunch_plan: PlanFactory, tmp_path: Path) -> None:
    topology = make_topology(nodes=1, nproc_per_node=1)
    plan = malaunch_plan("tensorflow_ps", topology, num_ps=2, num_workers=2)
    processes = plan.processes
    assert [(p.role, p.rank, p.local_rank, p.service) for p in processes] == [
        ("ps", None, 0, True),
        ("ps", None, 1, True),
        ("worker", 0, 0, False),
        ("worker", 1, 1, False),
    ]
    cluster = json.loads(processes[0].env["TF_CONFIG"])["cluster"]
    addresses = cluster["ps"] + cluster["worker"]
    assert all(a.startswith("127.0.0.1:") for a in addresses)
    assert len(set(addresses)) == 4
    for process in processes:
        config = json.loads(process.env["TF_CONFIG"])
        assert config["cluster"] == cluster
        index = process.local_rank
        assert config["task"] == {"type": process.role, "index": index}
        assert process.argv[2:] == (
            f"--ps_hosts={','.join(cluster['ps'])}",
            f"--worker_hosts={','.join(cluster['worker'])}",
            f"--job_name={process.role}",
            f"--task_index={index}",
        )
        assert process.log_file == str(tmp_path / "logs" / f"{process.role}-{index}.log")
    assert {k: list(v) for k, v in plan.topology.roles.items()} == cluster


def test_local_cluster_defaults(malaunch_plan: PlanFactory) -> None:
    plan = malaunch_plan("tensorflow_ps", make_topology(nodes=1, nproc_per_node=3), num_ps=1)
    assert [p.role for p in plan.processes] == ["ps", "worker", "worker", "worker"]
    plan = malaunch_plan("tensorflow_ps", make_topology(nodes=1), num_workers=2, num_ps=0)
    assert [p.role for p in plan.processes] == ["worker", "worker"]
    assert plan.processes[0].argv[2] == "--ps_hosts="
    assert "ps" not in json.loads(plan.processes[0].env["TF_CONFIG"])["cluster"]


def test_what_is_needed_without_roles(malaunch_plan: PlanFactory) -> None:
    with pytest.raises(UsageError, match=r"source 'local' has no ps/worker roles; use --topology"):
        malaunch_plan("tensorflow_ps", make_topology(nodes=1))
    with pytest.raises(UsageError, match="already describes one \\(ps, worker\\)"):
        malaunch_plan("tensorflow_ps", make_ps_topology(), num_ps=1)
    with pytest.raises(UsageError, match="source 'volcano' has 2 nodes"):
        malaunch_plan("tensorflow_ps", make_topology(nodes=2, source="volcano"), num_workers=1)


def test_roles_without_a_task(malaunch_plan: PlanFactory) -> None:
    topology = make_ps_topology().model_copy(update={"task": None})
    with pytest.raises(UsageError, match="but not this container's task"):
        malaunch_plan("tensorflow_ps", topology)


def test_empty_command(malaunch_plan: PlanFactory) -> None:
    with pytest.raises(UsageError, match="tensorflow_ps: no command given"):
        malaunch_plan("tensorflow_ps", make_ps_topology(), [])
