"""`malaunch --dry-run` through the installed command, on every fixture platform x framework.

Each test runs the real CLI in a clean environment made of a fixture's variables, reads the
plan JSON (SPEC §3) and checks the exact variables the SPEC names. For rank tables, the rank,
the device and the converted template-1 table the processes receive must agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from malaunch.testing import clean_env, read_env_file, run_cli

SHARED = Path(__file__).parents[1] / "fixtures" / "shared"
TEMPLATE2 = SHARED / "ranktable_template2_2pods_8dev.json"
POD = "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001-worker-{}"
JOB_ID = "modelarts-job-0d3c5a9e-0000-4000-8000-000000000001"
# SPEC §3's keys, plus "dirs" (directories the launcher creates before starting the process),
# "cpus" (the CPUs --cpu-bind binds it to, or null), "attempt_env" (variables it sets to the
# attempt) and "error_file" (torchelastic's).
CONTRACT_KEYS = {
    "role", "rank", "local_rank", "argv", "env", "cwd", "log_file", "service", "dirs", "cpus",
    "attempt_env", "error_file",
}  # fmt: skip
# Image-level conda variables of the ModelArts fixture name an env that does not exist here.
NOT_HERE = ("ANACONDA_DIR", "DEFAULT_CONDA_ENV_NAME")


def fixture_env(name: str, **extra: str) -> Dict[str, str]:
    """A clean environment holding one fixture's platform variables."""
    env = clean_env(read_env_file(SHARED / name))
    for key in NOT_HERE:
        env.pop(key, None)
    env.update(extra)
    return env


def dry_run(
    framework: str, env: Dict[str, str], *options: str, cwd: Optional[Path] = None
) -> Dict[str, Any]:
    command = ["python", "train.py", "--epochs", "1"]
    args = ["--framework", framework, *options, "--dry-run", "--", *command]
    result = run_cli(args, env=env, cwd=cwd)
    assert result.code == 0, result.stderr
    plan: Dict[str, Any] = json.loads(result.stdout)
    assert plan["framework"] == framework
    for process in plan["processes"]:
        assert set(process) == CONTRACT_KEYS
        assert process["env"].get("PYTHONUNBUFFERED", "1") == "1"
    return plan


def only(plan: Dict[str, Any], names: List[str]) -> List[Dict[str, str]]:
    """Each process's values of ``names`` (the variables under test)."""
    return [{k: p["env"][k] for k in names if k in p["env"]} for p in plan["processes"]]


# --- ModelArts Ascend: template-2 rank table, converted to template 1 ---------------------


def modelarts_env(
    tmp_path: Path, node: int, table: Optional[Dict[str, Any]] = None
) -> Dict[str, str]:
    config = tmp_path / "user-config"
    config.mkdir(exist_ok=True)
    doc = table if table is not None else json.loads(TEMPLATE2.read_text(encoding="utf-8"))
    (config / "jobstart_hccl.json").write_text(json.dumps(doc), encoding="utf-8")
    return fixture_env(
        "modelarts_ascend_env_example.env",
        RANK_TABLE_FILE=str(config),
        MA_MOUNT_PATH=str(tmp_path / f"mount{node}"),
        MA_CURRENT_INSTANCE_NAME=POD.format(node),
        MA_CURRENT_HOST_IP=f"192.0.2.{21 + node}",
        VC_TASK_INDEX=str(node),
    )


def assert_agrees_with_table(plan: Dict[str, Any], server_id: str, rank_var: str) -> None:
    """Every process's rank and device are those of one device of this server in the table."""
    path = Path(plan["topology"]["rank_table_file"])
    table = json.loads(path.read_text(encoding="utf-8"))
    assert table["status"] == "completed"
    assert table["version"] == "1.0"
    (server,) = [s for s in table["server_list"] if s["server_id"] == server_id]
    device_of_rank = {int(d["rank_id"]): int(d["device_id"]) for d in server["device"]}
    ascending = sorted(device_of_rank.values())
    workers = [p for p in plan["processes"] if not p["service"]]
    assert sorted(p["rank"] for p in workers) == sorted(device_of_rank)
    for process in workers:
        rank = int(process["env"][rank_var])
        assert rank == process["rank"]
        index = ascending.index(device_of_rank[rank])  # the in-container device index
        assert process["env"]["DEVICE_ID"] == process["env"]["ASCEND_DEVICE_ID"] == str(index)


@pytest.mark.parametrize("node", [0, 1])
def test_mindspore_on_modelarts(tmp_path: Path, node: int) -> None:
    logs = tmp_path / "logs"
    plan = dry_run("mindspore", modelarts_env(tmp_path, node), "--log-dir", str(logs))
    mount = tmp_path / f"mount{node}"
    table = str(mount / "rank_table" / "jobstart_hccl.json")
    assert plan["topology"]["rank_table_file"] == table
    assert [p["rank"] for p in plan["processes"]] == list(range(8 * node, 8 * node + 8))
    for i, process in enumerate(plan["processes"]):
        rank = 8 * node + i
        expected = {
            "RANK_TABLE_FILE": table,
            "RANK_ID": str(rank),
            "RANK_SIZE": "16",
            "RANK_START": str(8 * node),
            "DEVICE_ID": str(i),
            "ASCEND_DEVICE_ID": str(i),
            "JOB_ID": JOB_ID,
            "HCCL_CONNECT_TIMEOUT": "1800",
            "ASCEND_PROCESS_LOG_PATH": str(
                logs / JOB_ID / "ascend" / "process_log" / f"rank_{rank}"
            ),
            "PYTHONUNBUFFERED": "1",
        }
        assert {k: process["env"][k] for k in expected} == expected
        assert process["cwd"] == str(mount / "workspace" / f"device{i}")
        assert process["log_file"] == str(logs / f"{JOB_ID}-proc-rank-{rank}-device-{i}.txt")
        assert (process["role"], process["local_rank"], process["service"]) == ("worker", i, False)
    assert_agrees_with_table(plan, f"192.0.2.{21 + node}", "RANK_ID")


def test_ranks_follow_the_device_list_order_of_the_table(tmp_path: Path) -> None:
    # worker-0 lists its NPUs 7..0: rank 0 is on NPU 7, in-container index 7.
    doc = json.loads(TEMPLATE2.read_text(encoding="utf-8"))
    pods = doc["group_list"][0]["instance_list"]
    (worker0,) = [p for p in pods if p["pod_name"] == POD.format(0)]
    worker0["devices"].reverse()
    plan = dry_run("mindspore", modelarts_env(tmp_path, 0, doc), "--log-dir", str(tmp_path / "l"))
    assert only(plan, ["RANK_ID", "DEVICE_ID"])[:2] == [
        {"RANK_ID": "0", "DEVICE_ID": "7"},
        {"RANK_ID": "1", "DEVICE_ID": "6"},
    ]
    assert plan["processes"][0]["cwd"].endswith("/workspace/device7")
    assert_agrees_with_table(plan, "192.0.2.21", "RANK_ID")
    torch = dry_run("torch_ddp", modelarts_env(tmp_path, 0, doc), "--log-dir", str(tmp_path / "l"))
    assert_agrees_with_table(torch, "192.0.2.21", "RANK")
    assert [p["env"]["LOCAL_RANK"] for p in torch["processes"]] == [str(i) for i in range(8)]


def test_relative_script_works_from_the_device_dirs(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("")
    plan = dry_run("mindspore", modelarts_env(tmp_path, 1), "--log-dir", "logs", cwd=code)
    for process in plan["processes"]:
        assert process["argv"] == ["python", str(code / "train.py"), "--epochs", "1"]
        assert process["log_file"].startswith(str(code / "logs") + "/")


def test_torch_ddp_on_modelarts_takes_devices_from_the_table(tmp_path: Path) -> None:
    plan = dry_run("torch_ddp", modelarts_env(tmp_path, 1), "--log-dir", str(tmp_path / "l"))
    for i, env in enumerate(only(plan, ["RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK"])):
        assert env == {
            "RANK": str(8 + i),
            "LOCAL_RANK": str(i),
            "WORLD_SIZE": "16",
            "NODE_RANK": "1",
        }
    assert {p["env"]["MASTER_ADDR"] for p in plan["processes"]} == {"192.0.2.21"}
    assert all("RANK_TABLE_FILE" not in p["env"] for p in plan["processes"])
    assert_agrees_with_table(plan, "192.0.2.22", "RANK")
    exported = dry_run(
        "torch_ddp", modelarts_env(tmp_path, 1), "--export-rank-table", "--log-dir", str(tmp_path)
    )
    assert {p["env"]["RANK_TABLE_FILE"] for p in exported["processes"]} == {
        exported["topology"]["rank_table_file"]
    }


# --- Template 1 given directly -------------------------------------------------------------


def test_mindspore_with_a_template1_table(tmp_path: Path) -> None:
    table = str(SHARED / "ranktable_v1_0_2nodes_8dev.json")
    env = clean_env({"RANK_TABLE_FILE_V_1_0": table, "MA_CURRENT_HOST_IP": "192.0.2.12"})
    plan = dry_run("mindspore", env, "--log-dir", str(tmp_path))
    assert {p["env"]["RANK_TABLE_FILE"] for p in plan["processes"]} == {table}
    assert [p["env"]["RANK_ID"] for p in plan["processes"]] == [str(r) for r in range(8, 16)]
    job_ids = {p["env"]["JOB_ID"] for p in plan["processes"]}
    assert len(job_ids) == 1 and job_ids.pop().startswith("malaunch-")
    assert_agrees_with_table(plan, "192.0.2.12", "RANK_ID")
    # The generated job id is the same on the other node, so log names line up.
    other = dry_run(
        "mindspore", {**env, "MA_CURRENT_HOST_IP": "192.0.2.11"}, "--log-dir", str(tmp_path)
    )
    assert other["processes"][0]["env"]["JOB_ID"] == plan["processes"][0]["env"]["JOB_ID"]


# --- Volcano / Octopus ----------------------------------------------------------------------


def test_torch_ddp_on_volcano(tmp_path: Path) -> None:
    env = fixture_env("volcano_env_3workers.env")
    plan = dry_run("torch_ddp", env, "--nproc-per-node", "2", "--log-dir", str(tmp_path))
    names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK"]
    names += ["MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS"]
    master = "job-demo-worker-0.job-demo"
    assert only(plan, names) == [
        {"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "2",
         "GROUP_RANK": "1", "NODE_RANK": "1", "MASTER_ADDR": master, "MASTER_PORT": "29500",
         "OMP_NUM_THREADS": "1"},
        {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "6", "LOCAL_WORLD_SIZE": "2",
         "GROUP_RANK": "1", "NODE_RANK": "1", "MASTER_ADDR": master, "MASTER_PORT": "29500",
         "OMP_NUM_THREADS": "1"},
    ]  # fmt: skip


def test_torch_ddp_delegate_on_octopus(tmp_path: Path) -> None:
    env = fixture_env("octopus_env_example.env", MALAUNCH_TORCH_MODE="delegate")
    plan = dry_run("torch_ddp", env, "--log-dir", str(tmp_path))
    (process,) = plan["processes"]
    master = "modelarts-job-0d3c5a9e-0000-4000-8000-00000000000f-worker-0"
    assert process["argv"] == [
        "python", "-m", "torch.distributed.run", "--nproc-per-node", "8", "--nnodes", "2",
        "--node-rank", "1", "--master-addr", f"{master}.{master.rsplit('-', 2)[0]}",
        "--master-port", "6060", "train.py", "--epochs", "1",
    ]  # fmt: skip
    assert (process["role"], process["rank"]) == ("torchrun", 8)


def test_mindspore_dynamic_on_volcano(tmp_path: Path) -> None:
    env = fixture_env("octopus_env_example.env")
    plan = dry_run("mindspore", env, "--nproc-per-node", "2", "--log-dir", str(tmp_path))
    master = "modelarts-job-0d3c5a9e-0000-4000-8000-00000000000f-worker-0"
    common = {
        "MS_SCHED_HOST": f"{master}.{master.rsplit('-', 2)[0]}",
        "MS_SCHED_PORT": "6060",
        "MS_WORKER_NUM": "4",
        "MS_TOPO_TIMEOUT": "600",
        "RANK_SIZE": "4",
    }
    # Node 1: no scheduler here, only its two workers.
    assert [(p["role"], p["rank"], p["service"]) for p in plan["processes"]] == [
        ("worker", 2, False),
        ("worker", 3, False),
    ]
    names = [*common, "MS_ROLE", "MS_NODE_ID", "DEVICE_ID"]
    assert only(plan, names) == [
        {**common, "MS_ROLE": "MS_WORKER", "MS_NODE_ID": "2", "DEVICE_ID": "0"},
        {**common, "MS_ROLE": "MS_WORKER", "MS_NODE_ID": "3", "DEVICE_ID": "1"},
    ]


def test_tensorflow_ps_needs_roles_on_volcano() -> None:
    env = fixture_env("volcano_env_3workers.env")
    result = run_cli(["--framework", "tensorflow_ps", "--dry-run", "--", "python", "x.py"], env=env)
    assert result.code == 64
    assert "topology source 'volcano' has no ps/worker roles; use --topology tf-ps" in result.stderr


# --- TensorFlow PS --------------------------------------------------------------------------


def test_tensorflow_ps_from_tf_ps_hosts(tmp_path: Path) -> None:
    env = fixture_env("tf_ps_env_2ps_3workers.env")
    plan = dry_run("tensorflow_ps", env, "--log-dir", str(tmp_path))
    (process,) = plan["processes"]
    ps = "job-tf-ps-0.job-tf:2222,job-tf-ps-1.job-tf:2222"
    workers = "job-tf-worker-0.job-tf:2222,job-tf-worker-1.job-tf:2222,job-tf-worker-2.job-tf:2222"
    assert process["argv"] == [
        "python", "train.py", "--epochs", "1", f"--ps_hosts={ps}", f"--worker_hosts={workers}",
        "--job_name=worker", "--task_index=1",
    ]  # fmt: skip
    assert json.loads(process["env"]["TF_CONFIG"]) == {
        "cluster": {"ps": ps.split(","), "worker": workers.split(",")},
        "task": {"type": "worker", "index": 1},
    }
    assert (process["role"], process["rank"], process["service"]) == ("worker", 1, False)
    assert plan["topology"]["source"] == "tf-ps"
    same = dry_run("tensorflow_ps", env, "--topology", "tf-config", "--log-dir", str(tmp_path))
    assert same["processes"][0]["argv"] == process["argv"]


def test_tensorflow_ps_from_kubeflow_tf_config(tmp_path: Path) -> None:
    config = (SHARED / "tf_config_example.json").read_text(encoding="utf-8")
    plan = dry_run("tensorflow_ps", clean_env({"TF_CONFIG": config}), "--no-tf-flags")
    (process,) = plan["processes"]
    assert process["argv"] == ["python", "train.py", "--epochs", "1"]
    assert process["rank"] == 3  # the chief is rank 0, worker 2 comes third after it
    sent = json.loads(process["env"]["TF_CONFIG"])
    assert sent["task"] == {"type": "worker", "index": 2}
    assert set(sent["cluster"]) == {"chief", "ps", "worker", "evaluator"}


def test_tensorflow_ps_local_cluster(tmp_path: Path) -> None:
    args = ["--num-ps", "1", "--num-workers", "2", "--log-dir", str(tmp_path)]
    plan = dry_run("tensorflow_ps", clean_env(), *args)
    assert [(p["role"], p["rank"], p["service"]) for p in plan["processes"]] == [
        ("ps", None, True),
        ("worker", 0, False),
        ("worker", 1, False),
    ]
    cluster = plan["topology"]["roles"]
    assert [len(cluster["ps"]), len(cluster["worker"])] == [1, 2]
    for process in plan["processes"]:
        assert json.loads(process["env"]["TF_CONFIG"])["cluster"] == cluster


# --- Local ----------------------------------------------------------------------------------


def test_local_runs_ignore_a_torchrun_environment(tmp_path: Path) -> None:
    # Values torchrun gave *this* launcher must not leak into the processes it plans.
    env = fixture_env("torchrun_worker_env.env")
    plan = dry_run("torch_ddp", env, "--topology", "local", "--nproc-per-node", "2")
    names = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "MASTER_ADDR"]
    assert only(plan, names) == [
        dict(zip(names, ["0", "2", "0", "0", "127.0.0.1"])),
        dict(zip(names, ["1", "2", "1", "0", "127.0.0.1"])),
    ]
    assert "OMP_NUM_THREADS" not in plan["processes"][0]["env"]  # the launcher has it already


def test_mindspore_dynamic_locally_with_overrides(tmp_path: Path) -> None:
    args = ["--nproc-per-node", "2", "--master-port", "9123", "--ms-topo-timeout", "30"]
    plan = dry_run("mindspore", clean_env(), *args, "--env", "MS_TOPO_TIMEOUT=45")
    scheduler, *workers = plan["processes"]
    assert (scheduler["role"], scheduler["rank"], scheduler["service"]) == ("scheduler", None, True)
    # --env wins over the framework option; every process has the same scheduler values.
    same = {"MS_SCHED_HOST": "127.0.0.1", "MS_SCHED_PORT": "9123", "MS_TOPO_TIMEOUT": "45"}
    assert only(plan, ["MS_ROLE", *same]) == [
        {"MS_ROLE": "MS_SCHED", **same},
        {"MS_ROLE": "MS_WORKER", **same},
        {"MS_ROLE": "MS_WORKER", **same},
    ]
    assert [w["env"]["MS_NODE_ID"] for w in workers] == ["0", "1"]


# --- Usage errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--framework", "torch_ddp", "--ms-mode", "dynamic", "--dry-run", "--", "x"],
         "--ms-mode is an option of framework 'mindspore', not of 'torch_ddp'"),
        (["--framework", "torch_ddp", "--dry-run"], "malaunch: error: no command given"),
        (["--framework", "mindspore", "--ms-mode", "ranktable", "--dry-run", "--", "x"],
         "--ms-mode ranktable: topology source 'local' gives no rank table"),
        (["--framework", "torch_ddp", "--torch-mode", "delegate", "--dry-run", "--", "python"],
         "torch_ddp --torch-mode delegate: expected `python [options] script.py ...`"),
    ],
)  # fmt: skip
def test_usage_errors_are_exit_64(args: List[str], message: str) -> None:
    result = run_cli(args)
    assert result.code == 64
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_broken_rank_table_stops_before_planning(tmp_path: Path) -> None:
    table = SHARED / "invalid_ranktable_v1_0_duplicate_device_id.json"
    env = clean_env({"RANK_TABLE_FILE_V_1_0": str(table), "MA_CURRENT_HOST_IP": "192.0.2.11"})
    result = run_cli(["--framework", "mindspore", "--dry-run", "--", "x"], env=env)
    assert result.code == 65
    assert "duplicate" in result.stderr
