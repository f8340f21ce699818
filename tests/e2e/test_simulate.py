"""`malaunch simulate` through the installed command, with tiny plain-Python workers.

No framework is needed: the workers only record the environment they received and their pid,
then exit, crash or wait as told. The real PyTorch / TensorFlow / MindSpore jobs are in
``test_frameworks_*.py``.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from malaunch.testing import (
    clean_env,
    malaunch_executable,
    read_summary,
    run_cli,
    run_dir,
    wait_gone,
)

REPO = Path(__file__).resolve().parents[2]

# Records env and pid; "crash:R:C" makes rank R exit C once every rank is up, the others wait
# to be stopped; "wait" makes every rank wait to be stopped.
WORKER = """\
import json, os, pathlib, sys, time
out, mode, world = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rank = os.environ.get("RANK", "?")
out.mkdir(parents=True, exist_ok=True)
(out / f"rank{rank}.json").write_text(json.dumps(dict(os.environ)))
(out / f"rank{rank}.pid").write_text(str(os.getpid()))
print(f"hello from rank {rank}", flush=True)
deadline = time.monotonic() + 60
while len(list(out.glob("*.pid"))) < world and time.monotonic() < deadline:
    time.sleep(0.05)
if mode == "ok":
    sys.exit(0)
if mode.startswith("crash:") and rank == mode.split(":")[1]:
    print(f"rank {rank} crashing", flush=True)
    sys.exit(int(mode.split(":")[2]))
print(f"rank {rank} waiting", flush=True)
time.sleep(120)
sys.exit(1)
"""


def worker(tmp_path: Path, mode: str, world: int) -> List[str]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    return [sys.executable, str(script), str(tmp_path / "out"), mode, str(world)]


def simulate(tmp_path: Path, *options: str, command: Sequence[str] = ()) -> List[str]:
    args = ["simulate", *options, "--log-dir", str(tmp_path / "logs")]
    return [*args, "--", *command] if command else args


def parse_print_env(text: str) -> List[Dict[str, str]]:
    """``--print-env`` output -> one dict per node; the launcher line under key ``#launcher``."""
    nodes: List[Dict[str, str]] = []
    for line in text.splitlines():
        if line.startswith("# node "):
            nodes.append({})
        elif line.startswith("# launcher: "):
            nodes[-1]["#launcher"] = line[len("# launcher: ") :]
        elif line and not line.startswith("#"):
            key, _, value = shlex.split(line)[0].partition("=")  # quoted for a shell
            nodes[-1][key] = value
    return nodes


def print_env(tmp_path: Path, *options: str) -> List[Dict[str, str]]:
    command = ["python", "train.py"]
    result = run_cli(simulate(tmp_path, "--print-env", *options, command=command))
    assert result.code == 0, result.stderr
    return parse_print_env(result.stdout)


def rank_envs(tmp_path: Path) -> Dict[int, Dict[str, str]]:
    envs = {}
    for path in (tmp_path / "out").glob("rank*.json"):
        envs[int(path.stem[4:])] = json.loads(path.read_text(encoding="utf-8"))
    return envs


def assert_all_gone(pids: Sequence[int]) -> None:
    assert wait_gone(pids) == []  # bounded: init reaps orphans asynchronously


def all_pids(tmp_path: Path) -> List[int]:
    """Workers' pids, and every node launcher's pid from the simulation's summary."""
    pids = [int(p.read_text()) for p in (tmp_path / "out").glob("*.pid")]
    return pids + [entry["pid"] for entry in read_summary(tmp_path / "logs")["processes"]]


# --- what each platform injects ---------------------------------------------------------


def test_print_env_modelarts_gives_each_node_its_pod_ip_and_rank_table_dir(tmp_path: Path) -> None:
    platform_dir = tmp_path / "platform"
    nodes = print_env(
        tmp_path, "--nodes", "2", "--nproc-per-node", "4", "--platform", "modelarts",
        "--platform-dir", str(platform_dir), "--framework", "mindspore",
    )  # fmt: skip
    assert len(nodes) == 2
    job = nodes[0]["MA_VJ_NAME"]
    assert job.startswith("ma-job-")
    for k, env in enumerate(nodes):
        assert env["MA_VJ_NAME"] == job
        assert env["MA_CURRENT_INSTANCE_NAME"] == f"modelarts-job-{job[7:]}-worker-{k}"
        assert env["MA_CURRENT_HOST_IP"] == f"127.0.0.{k + 1}"
        assert env["VC_WORKER_HOSTS"] == "127.0.0.1,127.0.0.2"
        assert (env["VC_TASK_INDEX"], env["MA_NUM_HOSTS"], env["MA_NUM_GPUS"]) == (str(k), "2", "4")
        assert env["RANK_TABLE_FILE"] == str(platform_dir / f"node-{k}" / "config")
        assert env["MA_MOUNT_PATH"] == str(platform_dir / f"node-{k}" / "mount")
        assert env["MA_LOG_DIR"] == str(tmp_path / "logs" / f"node-{k}")
        assert "VC_WORKER_PORT" not in env
        launcher = env["#launcher"]
        assert launcher.startswith(malaunch_executable())
        assert f"--log-dir {tmp_path / 'logs' / f'node-{k}'} -- python train.py" in launcher
    port = nodes[0]["#launcher"].split("--master-port ")[1].split()[0]
    assert f"--master-port {port}" in nodes[1]["#launcher"]  # the same rendezvous everywhere
    # --print-env starts nothing, but with --platform-dir it puts the platform's files in
    # place, the rank table already completed, so that the printed commands run as they are.
    for k in range(2):
        table = json.loads(
            (platform_dir / f"node-{k}" / "config" / "jobstart_hccl.json").read_text()
        )
        assert table["status"] == "completed"
        assert (platform_dir / f"node-{k}" / "mount").is_dir()


def test_print_env_octopus_has_data_paths_and_worker_port(tmp_path: Path) -> None:
    nodes = print_env(
        tmp_path, "--nodes", "3", "--platform", "octopus", "--platform-dir",
        str(tmp_path / "p"), "--framework", "torch_ddp",
    )  # fmt: skip
    assert len(nodes) == 3
    assert len({env["VC_WORKER_PORT"] for env in nodes}) == 1
    for k, env in enumerate(nodes):
        assert "RANK_TABLE_FILE" not in env
        assert env["MA_NUM_GPUS"] == "1"
        base = tmp_path / "p" / f"node-{k}"
        assert json.loads(env["DATASET_MAP"]) == {
            "dataset-0": str(base / "data" / "dataset" / "dataset-0")
        }
        assert env["RESULT"] == str(base / "result")
        assert env["MODEL"] == str(base / "data" / "model")
        assert "--master-port" not in env["#launcher"]  # VC_WORKER_PORT gives it


def test_print_env_volcano_gives_only_volcano_variables(tmp_path: Path) -> None:
    nodes = print_env(
        tmp_path, "--nodes", "2", "--nproc-per-node", "3", "--platform", "volcano",
        "--framework", "torch_ddp",
    )  # fmt: skip
    for k, env in enumerate(nodes):
        names = {key for key in env if not key.startswith("#")}
        assert names == {"VC_WORKER_HOSTS", "VC_WORKER_NUM", "VC_TASK_INDEX", "VK_TASK_INDEX"}
        assert (env["VC_TASK_INDEX"], env["VK_TASK_INDEX"]) == (str(k), str(k))
        assert "--nproc-per-node 3" in env["#launcher"]


def test_print_env_tf_ps_has_one_node_per_task_ps_first(tmp_path: Path) -> None:
    nodes = print_env(
        tmp_path, "--nodes", "3", "--num-ps", "2", "--platform", "tf-ps",
        "--framework", "tensorflow_ps",
    )  # fmt: skip
    tasks = [(env["MA_TASK_NAME"], env["VC_TASK_INDEX"]) for env in nodes]
    assert tasks == [("ps", "0"), ("ps", "1"), ("worker", "0"), ("worker", "1"), ("worker", "2")]
    ps_hosts = nodes[0]["TF_PS_HOSTS"].split(",")
    worker_hosts = nodes[0]["TF_WORKER_HOSTS"].split(",")
    assert [h.split(":")[0] for h in ps_hosts + worker_hosts] == [
        f"127.0.0.{k}" for k in range(1, 6)
    ]
    assert len({h.split(":")[1] for h in ps_hosts + worker_hosts}) == 5  # distinct ports
    assert all(env["TF_PS_HOSTS"] == nodes[0]["TF_PS_HOSTS"] for env in nodes)
    assert "--num-ps" not in nodes[0]["#launcher"]  # shapes the platform, not the launcher


GIVEN = (
    "--framework torch_ddp",
    "--console-ranks 0",
    "--grace-period 1.5",
    "--env A=b=c --env D=e",
    "--torch-mode delegate",
    "--export-rank-table",
)


def test_launcher_options_are_passed_to_every_node(tmp_path: Path) -> None:
    nodes = print_env(
        tmp_path, "--nodes", "2", "--platform", "octopus", "--framework", "torch_ddp",
        "--console-ranks", "0", "--grace-period", "1.5", "--env", "A=b=c", "--env", "D=e",
        "--torch-mode", "delegate", "--export-rank-table",
    )  # fmt: skip
    for env in nodes:
        launcher = env["#launcher"]
        for option in GIVEN:
            assert option in launcher
        for own in ("--nodes", "--platform", "--print-env"):
            assert own not in launcher


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--nodes", "2", "--platform", "octopus"], "missing --framework"),
        (["--nodes", "2", "--platform", "slurm", "--framework", "torch_ddp"], "slurm"),
        (["--platform", "octopus", "--framework", "torch_ddp"], "--nodes"),
    ],
)
def test_usage_errors_exit_64(tmp_path: Path, options: List[str], message: str) -> None:
    result = run_cli(simulate(tmp_path, *options, command=["python", "train.py"]))
    assert result.code == 64
    assert message in result.stderr
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    ("framework", "said", "first_node"),
    [
        (
            "torch_ddp",
            "simulating volcano (the plainest: a host list, a node index and --nproc-per-node; "
            "--platform chooses)",
            "# node 0: worker 0 at 127.0.0.1 (volcano)",
        ),
        (
            "tensorflow_ps",
            "simulating tf-ps (one node per ps and worker task, the roles tensorflow_ps needs; "
            "--platform chooses)",
            "# node 0: ps 0 at 127.0.0.1 (tf-ps)",
        ),
    ],
)
def test_without_platform_a_plain_default_is_simulated_and_said(
    tmp_path: Path, framework: str, said: str, first_node: str
) -> None:
    args = ["simulate", "--print-env", "--nodes", "2", "--framework", framework, "--", "python"]
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert result.stderr == f"malaunch: info: no --platform given: {said}\n"
    assert result.stdout.splitlines()[0] == first_node


def test_a_chief_only_where_the_platform_has_one(tmp_path: Path) -> None:
    args = ["simulate", "--chief", "--nodes", "2", "--platform", "octopus",
            "--framework", "torch_ddp", "--", "python"]  # fmt: skip
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: --chief: only --platform tf-ps has a chief task (not octopus)\n"
    )


# --- real runs --------------------------------------------------------------------------


def test_octopus_run_gives_every_rank_one_cluster(tmp_path: Path) -> None:
    command = worker(tmp_path, "ok", 4)
    # Platform variables of the machine running simulate must not reach the nodes.
    env = clean_env({"MA_NUM_GPUS": "8", "TF_CONFIG": "{}", "VC_TASK_INDEX": "5"})
    result = run_cli(
        simulate(tmp_path, "--nodes", "2", "--nproc-per-node", "2", "--platform", "octopus",
                 "--framework", "torch_ddp", command=command),
        env=env,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    envs = rank_envs(tmp_path)
    assert sorted(envs) == [0, 1, 2, 3]
    port = envs[0]["VC_WORKER_PORT"]
    for rank, env in envs.items():
        node = rank // 2
        assert (env["WORLD_SIZE"], env["LOCAL_RANK"], env["NODE_RANK"]) == (
            "4",
            str(rank % 2),
            str(node),
        )
        assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", port)
        assert env["VC_TASK_INDEX"] == str(node)
        assert env["MA_NUM_GPUS"] == "2"
        assert "TF_CONFIG" not in env
        assert f"[node {node}] [rank {rank}] hello from rank {rank}" in result.stdout.splitlines()
    report = read_summary(tmp_path / "logs")
    assert report["exit_code"] == 0
    assert [(p["role"], p["rank"], p["exit_code"]) for p in report["processes"]] == [
        ("node", 0, 0),
        ("node", 1, 0),
    ]
    for node in (0, 1):
        inner = read_summary(run_dir(tmp_path / "logs") / f"node-{node}")
        assert sorted(p["rank"] for p in inner["processes"]) == [2 * node, 2 * node + 1]


def test_crash_on_node_1_stops_the_job_with_its_code(tmp_path: Path) -> None:
    command = worker(tmp_path, "crash:3:7", 4)
    result = run_cli(
        simulate(tmp_path, "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano",
                 "--framework", "torch_ddp", "--grace-period", "2", "--tail-lines", "1",
                 command=command),
    )  # fmt: skip
    assert result.code == 7, result.stderr
    report = read_summary(tmp_path / "logs")
    assert (report["first_failure"]["role"], report["first_failure"]["rank"]) == ("node", 1)
    # The parent's failure is the failed rank's, from node 1's summary, and --tail-lines holds
    # (not the end of node 1's console, which nests that summary's table).
    rank_log = str(run_dir(tmp_path / "logs") / "node-1" / "worker-3.log")
    assert (report["first_failure"]["tail"], report["first_failure"]["tail_file"]) == (
        ["rank 3 crashing"], rank_log,
    )  # fmt: skip
    parent = [line for line in result.stderr.splitlines() if line.startswith("malaunch:")]
    assert parent[-2:] == [
        f"malaunch: info: last line of {rank_log} (node 1):",
        "malaunch: info:   | rank 3 crashing",
    ]
    node1 = read_summary(run_dir(tmp_path / "logs") / "node-1")
    assert node1["first_failure"]["rank"] == 3
    assert node1["first_failure"]["exit_code"] == 7
    assert "[node 1] [rank 3] rank 3 crashing" in result.stdout.splitlines()
    # The parent names its nodes as nodes (not "node 0 node 1"); none is left to stop by then,
    # so it says nothing of stopping.
    parent = [line for line in result.stderr.splitlines() if not line.startswith("[node ")]
    assert "malaunch: error: node 1 (pid " in result.stderr
    assert not [line for line in parent if ": stopping" in line], result.stderr
    assert not [line for line in parent if "node 0 node" in line or "0 local" in line]
    # Node 0's launcher still counts what it stops, in the singular or plural as need be.
    assert (
        "[node 0] malaunch: warning: node 1 rank 3 exited with code 7: stopping "
        "(2 local processes)" in result.stdout.splitlines()
    ), result.stdout
    assert len(list((tmp_path / "out").glob("*.pid"))) == 4
    assert_all_gone(all_pids(tmp_path))


def test_sigterm_to_simulate_reaches_every_node_and_leaves_nothing(tmp_path: Path) -> None:
    command = worker(tmp_path, "wait", 4)
    args = simulate(tmp_path, "--nodes", "2", "--nproc-per-node", "2", "--platform", "octopus",
                    "--framework", "torch_ddp", "--grace-period", "2", command=command)  # fmt: skip
    proc = subprocess.Popen(
        [malaunch_executable(), *args], env=clean_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(list((tmp_path / "out").glob("*.pid"))) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list((tmp_path / "out").glob("*.pid"))) == 4
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    report = read_summary(tmp_path / "logs")
    assert report["exit_code"] == 143
    assert_all_gone(all_pids(tmp_path))


def test_rank_table_that_never_completes_exits_69(tmp_path: Path) -> None:
    command = worker(tmp_path, "ok", 4)
    result = run_cli(
        simulate(tmp_path, "--nodes", "2", "--nproc-per-node", "2", "--platform", "modelarts",
                 "--ranktable-never-ready", "--wait-timeout", "1", "--framework", "mindspore",
                 command=command),
    )  # fmt: skip
    assert result.code == 69, result.stderr
    # Node launchers' own messages reach the console among their output, prefixed.
    errors = [line for line in result.stdout.splitlines() if "malaunch: error:" in line]
    assert errors
    for line in errors:
        assert line.startswith(("[node 0] ", "[node 1] "))
        assert "not ready" in line
        assert "initializing" in line
    assert not (tmp_path / "out").exists()  # no worker started
    report = read_summary(tmp_path / "logs")
    assert report["first_failure"]["exit_code"] == 69
    # simulate's own lines: every node failed alike, one of them is the error, the others
    # are warnings (SPEC §3: one error line), each naming its node.
    own = [line for line in result.stderr.splitlines() if line.startswith("malaunch: ")]
    failed = sorted(line.split(" (pid ")[0] for line in own if "exited with code 69 " not in line
                    and line.endswith("exited with code 69"))  # fmt: skip
    assert [line.split(" node ")[0] for line in failed] == [
        "malaunch: error:",
        "malaunch: warning:",
    ], own
    assert len([line for line in own if line.startswith("malaunch: error: ")]) == 1, own


def test_tf_ps_stops_the_ps_nodes_once_the_workers_succeed(tmp_path: Path) -> None:
    script = tmp_path / "task.py"
    script.write_text(
        "import sys, time\n"
        "print('args', ' '.join(sys.argv[1:]), flush=True)\n"
        "if '--job_name=ps' in sys.argv:\n"
        "    time.sleep(120)\n",
        encoding="utf-8",
    )
    result = run_cli(
        simulate(tmp_path, "--nodes", "2", "--num-ps", "1", "--platform", "tf-ps",
                 "--framework", "tensorflow_ps", command=[sys.executable, str(script)]),
    )  # fmt: skip
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    for node, task in ((1, "worker"), (2, "worker")):
        index = node - 1
        assert any(
            line.startswith(f"[node {node}] ") and f"--job_name={task} --task_index={index}" in line
            for line in lines
        )
    report = read_summary(tmp_path / "logs")
    rows = {p["rank"]: p for p in report["processes"]}
    # Every node launcher ends by itself with 0, the ps node included: the workers' launchers
    # told node 0 they were done, and node 0 told the ps node to finish (SPEC §9).
    assert [(rows[n]["exit_code"], rows[n]["service"]) for n in range(3)] == [(0, False)] * 3
    assert report["first_failure"] is None
    ps_node = read_summary(run_dir(tmp_path / "logs") / "node-0")
    (ps,) = ps_node["processes"]
    assert (ps["role"], ps["service"], ps["signal"]) == ("ps", True, "SIGTERM")
    assert ps_node["exit_code"] == 0


def test_modelarts_rank_table_env_agrees_with_the_converted_table(tmp_path: Path) -> None:
    """MindSpore rank-table mode, checked by examples/mindspore_ranktable_check.py.

    The table starts initializing, turns partial, then completed; pods are listed last first
    and hold NPUs 4-5, so rank, physical device and in-container index must all be derived.
    The script path is relative: it must still work from each device's working directory.
    """
    result = run_cli(
        simulate(tmp_path, "--nodes", "2", "--nproc-per-node", "2", "--platform", "modelarts",
                 "--first-device-id", "4", "--ranktable-delay", "1", "--wait-timeout", "60",
                 "--framework", "mindspore",
                 command=[sys.executable, "examples/mindspore_ranktable_check.py"]),
        cwd=REPO,
    )  # fmt: skip
    assert result.code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for rank in range(4):
        node, index = divmod(rank, 2)
        expected = (
            f"[node {node}] [rank {rank}] rank {rank}/4: server 127.0.0.{node + 1} "
            f"device_id {4 + index} -> DEVICE_ID {index}"
        )
        assert any(line.startswith(expected) and line.endswith(" ok") for line in lines), expected
    assert "[ranktable] rank table completed after 1s (2 nodes)" in lines


def test_print_env_gives_complete_commands_with_the_job_channel(tmp_path: Path) -> None:
    """Each node's command names the job port, and MALAUNCH_* options the user set are part
    of each node's environment: with both, a node runs anywhere (tests/e2e/test_job_channel.py
    runs them)."""
    env = clean_env({"MALAUNCH_FRAMEWORK": "torch_ddp", "MALAUNCH_GRACE_PERIOD": "2"})
    result = run_cli(
        simulate(tmp_path, "--print-env", "--nodes", "3", "--platform", "volcano",
                 command=["python", "train.py"]),
        env=env,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    nodes = parse_print_env(result.stdout)
    ports = {node["#launcher"].split("--job-port ")[1].split()[0] for node in nodes}
    assert len(ports) == 1 and ports.pop().isdigit()
    for node in nodes:
        assert (node["MALAUNCH_FRAMEWORK"], node["MALAUNCH_GRACE_PERIOD"]) == ("torch_ddp", "2")


def test_the_safety_net_stops_a_node_that_does_not_stop_itself(tmp_path: Path) -> None:
    """Without the job channel a node launcher never learns of the other's failure: the
    simulation's parent stops it after heartbeat timeout + grace + 5 s, and says so."""
    script = tmp_path / "task.py"
    script.write_text(
        "import os, sys, time\n"
        "pid_file = os.path.join(sys.argv[1], os.environ['RANK'] + '.pid')\n"
        "open(pid_file, 'w').write(str(os.getpid()))\n"
        "sys.exit(3) if os.environ['RANK'] == '0' else time.sleep(600)\n"
    )
    (tmp_path / "out").mkdir()
    result = run_cli(
        simulate(tmp_path, "--nodes", "2", "--platform", "volcano", "--framework", "torch_ddp",
                 "--no-job-channel", "--heartbeat-timeout", "0.5", "--grace-period", "0.5",
                 command=[sys.executable, str(script), str(tmp_path / "out")]),
    )  # fmt: skip
    assert result.code == 3, result.stderr
    said = "node 1 did not stop by itself within 6s of the first exit of another; stopping it"
    assert said in result.stderr
    assert_all_gone(all_pids(tmp_path))


@settings(max_examples=5, derandomize=True, deadline=None)
@given(
    nodes=st.integers(21, 1024),
    per_node=st.integers(1, 10_000),
    twin=st.booleans(),
)
def test_a_job_past_the_ranks_limit_is_refused_once_before_any_node_starts(
    nodes: int, per_node: int, twin: bool
) -> None:
    # Each node launcher refused it with 65 on its own: one error line per node, 21 or more.
    assume(nodes * per_node > 200_000)
    args = ["simulate", "--framework", "torch_ddp"]
    env = {"MALAUNCH_NODES": str(nodes), "MALAUNCH_NPROC_PER_NODE": str(per_node)}
    if not twin:
        args += ["--nodes", str(nodes), "--nproc-per-node", str(per_node)]
        env = {}
    result = run_cli([*args, "--", "python", "-c", "pass"], env=env)
    assert result.code == 64, result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    named = ["--nodes", "--nproc-per-node"]
    if twin:
        named = ["MALAUNCH_NODES", "MALAUNCH_NPROC_PER_NODE"]
    assert errors == [
        f"malaunch: error: {named[0]} {nodes} x {named[1]} {per_node} gives "
        f"{nodes * per_node} ranks; at most 200000 in one job"
    ]
