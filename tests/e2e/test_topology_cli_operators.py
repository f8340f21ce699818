"""``malaunch topology`` on Kubernetes operators' pods, and the refusals of ``auto``, through the
installed command: Kubeflow PyTorchJob, Volcano multi-task, MindX ascend-operator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from malaunch.testing import clean_env, malaunch_executable, read_env_file, run_cli

ENV = Path(__file__).parents[1] / "fixtures" / "env"
SHARED = Path(__file__).parents[1] / "fixtures" / "shared"


@pytest.fixture
def base(tmp_path: Path) -> Dict[str, str]:
    """A clean environment whose /etc/volcano is an empty folder."""
    return clean_env({"MALAUNCH_VOLCANO_DIR": str(tmp_path)})


def pod(base: Dict[str, str], name: str, **extra: str) -> Dict[str, str]:
    return {**base, **read_env_file(ENV / name), **extra}


def topology_json(env: Dict[str, str], *args: str) -> Dict[str, Any]:
    result = run_cli(["topology", "--json", *args], env=env)
    assert result.code == 0, result.stderr
    loaded: Dict[str, Any] = json.loads(result.stdout)
    return loaded


def ranks(topo: Dict[str, Any]) -> List[List[int]]:
    return [[d["rank"] for d in node["devices"]] for node in topo["nodes"]]


def test_kubeflow_pytorchjob_worker(base: Dict[str, str]) -> None:
    topo = topology_json(pod(base, "kubeflow_pytorchjob_worker.env"))
    assert topo["source"] == "kubeflow"
    assert (topo["node_rank"], len(topo["nodes"])) == (2, 4)
    assert ranks(topo)[2] == [8, 9, 10, 11]
    assert (topo["master_addr"], topo["master_port"]) == ("bert-master-0", 23456)


def test_kubeflow_trainer_v2_summary(base: Dict[str, str]) -> None:
    result = run_cli(["topology"], env=pod(base, "kubeflow_trainer_v2.env"))
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "source:      kubeflow" in lines
    assert "nodes:       2 (this node: 1)" in lines
    assert "world size:  16" in lines
    assert (
        " * node 1: llama-trainer-node-0-1.llama ranks 8-15 on devices " + ("0,1,2,3,4,5,6,7")
        in lines
    )


def test_kubeflow_elastic_is_refused(base: Dict[str, str]) -> None:
    result = run_cli(["topology"], env=pod(base, "kubeflow_pytorchjob_elastic.env"))
    assert result.code == 65
    assert result.stderr == (
        'malaunch: error: PET_NNODES="1:3": elastic PyTorchJobs (elasticPolicy, torchrun '
        "rendezvous) are not supported; malaunch starts a fixed number of nodes with fixed node "
        "ranks: remove elasticPolicy and give the job a Master replica\n"
    )


def test_volcano_master_and_worker_tasks(base: Dict[str, str]) -> None:
    env = pod(base, "volcano_pytorch_worker.env")
    topo = topology_json(env, "--nproc-per-node", "4")
    assert topo["source"] == "volcano-tasks"
    assert [n["host"] for n in topo["nodes"]] == [
        "resnet-master-0.resnet", "resnet-worker-0.resnet", "resnet-worker-1.resnet",
    ]  # fmt: skip
    assert [n["role"] for n in topo["nodes"]] == ["master", "worker", "worker"]
    assert topo["node_rank"] == 1
    assert ranks(topo) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert (topo["master_addr"], topo["master_port"]) == ("resnet-master-0.resnet", 23456)
    # Named, the one-task source still reads the worker task only, as before.
    assert topology_json(env, "--topology", "volcano")["node_rank"] == 0


def test_mindx_pytorch_pod(base: Dict[str, str]) -> None:
    topo = topology_json(pod(base, "mindx_operator_pytorch_env.env"))
    assert topo["source"] == "mindx-pytorch"
    assert (topo["node_rank"], len(topo["nodes"])) == (1, 2)
    assert ranks(topo)[1] == list(range(8, 16))
    assert [d["device_id"] for d in topo["nodes"][1]["devices"]] == list(range(8, 16))
    assert topo["peers_reachable"] is True  # node 0 is the master, which every pod dials


def test_mindx_tensorflow_pod(base: Dict[str, str]) -> None:
    topo = topology_json(pod(base, "mindx_operator_tensorflow_env.env"))
    assert topo["source"] == "mindx-tensorflow"
    assert (topo["node_rank"], len(topo["nodes"])) == (1, 3)
    assert topo["nodes"][1]["host"] == "192.0.2.52"


# --- never silently alone --------------------------------------------------------------------


def test_a_distributed_job_no_source_reads_is_refused(base: Dict[str, str]) -> None:
    env = {**base, "WORLD_SIZE": "8", "RANK": "1", "MASTER_ADDR": "job-master-0.job"}
    result = run_cli(["topology"], env=env)
    assert result.code == 65
    assert result.stderr == (
        "malaunch: error: no topology source matched, but this environment shows a distributed "
        "job (WORLD_SIZE=8, RANK=1, MASTER_ADDR=job-master-0.job): name its source with "
        "--topology kubeflow, or run alone on purpose with --topology local\n"
    )
    # The same refusal stops a launch before anything starts.
    launch = run_cli(["--framework", "torch_ddp", "--dry-run", "--", "python", "t.py"], env=env)
    assert (launch.code, launch.stderr) == (65, result.stderr)


REFUSED = (
    "malaunch: error: no topology source matched, but this environment shows a distributed job "
)
LOCAL = ", or run alone on purpose with --topology local\n"
NO_SOURCE = "; name a plugin's source with --topology"
POD_NEEDS = (
    "as they are: kubeflow needs PET_NNODES and mindx-pytorch LOCAL_WORLD_SIZE, both taking "
    "RANK as this node's rank"
)
MINDX_POD = {"RANK": "1", "WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "192.0.2.9"}


def torchrun_worker_unmarked() -> Dict[str, str]:
    """What torchrun gives a worker, minus the markers of a nested launch."""
    env = read_env_file(SHARED / "torchrun_worker_env.env")
    return {k: v for k, v in env.items() if k not in ("TORCHELASTIC_RUN_ID", "GROUP_RANK")}


# (id, environment, what the line says after the prefix). The torch-style ones once all named
# kubeflow, which misreads a process count as nodes; the others once ran alone with exit 0.
SIGNS = [
    ("mindx-pod-without-task-id", MINDX_POD,
     "(WORLD_SIZE=16, RANK=1, MASTER_ADDR=192.0.2.9): name its source with "
     "--topology mindx-pytorch"),
    ("mindx-local-rank-list", {"LOCAL_RANK": "0,1,2,3,4,5,6,7"},
     "(LOCAL_RANK=0,1,2,3,4,5,6,7): name its source with --topology mindx-pytorch"),
    ("bare-torch-variables", {"RANK": "1", "WORLD_SIZE": "16", "MASTER_ADDR": "192.0.2.9"},
     "(WORLD_SIZE=16, RANK=1, MASTER_ADDR=192.0.2.9): no built-in source reads these "
     + POD_NEEDS + NO_SOURCE),
    ("torchrun-worker-unmarked", torchrun_worker_unmarked(),
     "(WORLD_SIZE=16, RANK=11, GROUP_WORLD_SIZE=2, MASTER_ADDR=192.0.2.21): no built-in source "
     "reads these as they are: with LOCAL_RANK=3 they are one process's, as another launcher "
     "gives its workers" + NO_SOURCE),
    ("remote-mindspore-scheduler", {"MS_ROLE": "MS_WORKER", "MS_SCHED_HOST": "192.0.2.5"},
     "(MS_ROLE=MS_WORKER, MS_SCHED_HOST=192.0.2.5): name its source with --topology mindx"),
    ("node-rank", {"NODE_RANK": "1"}, "(NODE_RANK=1): no built-in source reads these" + NO_SOURCE),
    ("group-world-size", {"GROUP_WORLD_SIZE": "2"},
     "(GROUP_WORLD_SIZE=2): no built-in source reads these" + NO_SOURCE),
    ("slurm-procid", {"SLURM_PROCID": "3"},
     "(SLURM_PROCID=3): name its source with --topology slurm"),
    ("slurm-nprocs", {"SLURM_NPROCS": "4"},
     "(SLURM_NPROCS=4): name its source with --topology slurm"),
    ("pmix-rank", {"PMIX_RANK": "1", "PMIX_NAMESPACE": "prterun-node-1@1"},
     "(PMIX_RANK=1): no built-in source reads these" + NO_SOURCE),
]  # fmt: skip


@pytest.mark.parametrize(("extra", "says"), [pytest.param(e, s, id=i) for i, e, s in SIGNS])
def test_auto_refuses_each_sign_of_a_job(
    base: Dict[str, str], extra: Dict[str, str], says: str
) -> None:
    result = run_cli(["topology"], env={**base, **extra})
    assert (result.code, result.stderr) == (65, REFUSED + says + LOCAL)


def test_the_named_source_reads_the_job_the_refusal_saw(base: Dict[str, str]) -> None:
    """The advice holds: mindx-pytorch reads 2 pods of 8, kubeflow refuses 16 nodes of 1."""
    env = {**base, **MINDX_POD}
    topo = topology_json(env, "--topology", "mindx-pytorch")
    assert (len(topo["nodes"]), topo["node_rank"], len(ranks(topo)[1])) == (2, 1, 8)
    result = run_cli(["topology", "--topology", "kubeflow"], env=env)
    assert (result.code, result.stderr) == (
        65,
        "malaunch: error: PET_NNODES is not set, and WORLD_SIZE=16 cannot count the PyTorchJob's "
        "nodes where LOCAL_WORLD_SIZE=8 is set (it counts processes then): set PET_NNODES, or "
        "read a MindX AscendJob pod with --topology mindx-pytorch\n",
    )
    # A launch refuses alike before anything starts.
    launch = run_cli(
        ["--topology", "kubeflow", "--framework", "torch_ddp", "--dry-run", "--", "python", "t.py"],
        env=env,
    )
    assert (launch.code, launch.stderr) == (65, result.stderr)


def test_local_stays_available_for_users_who_mean_it(base: Dict[str, str]) -> None:
    env = {**base, "WORLD_SIZE": "8", "RANK": "1", "MASTER_ADDR": "job-master-0.job"}
    topo = topology_json(env, "--topology", "local", "--nproc-per-node", "2")
    assert topo["source"] == "local"
    assert len(topo["nodes"][0]["devices"]) == 2


def test_a_malaunch_worker_that_runs_malaunch_again_is_refused(
    base: Dict[str, str], tmp_path: Path
) -> None:
    """A real nested launch: the outer launcher's worker runs ``malaunch --dry-run``."""
    script = tmp_path / "inner.py"
    script.write_text(
        "import subprocess, sys\n"
        "inner = subprocess.run([sys.argv[1], '--framework', 'torch_ddp', '--dry-run', '--',\n"
        "                        'python', 't.py'], capture_output=True, text=True)\n"
        "print('inner', inner.returncode, inner.stderr.strip())\n",
        encoding="utf-8",
    )
    log_dir = tmp_path / "logs"
    result = run_cli(
        ["--framework", "torch_ddp", "--log-dir", str(log_dir), "--console-ranks", "all",
         "--", "python", str(script), malaunch_executable()],
        env=base,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert (
        "[rank 0] inner 65 malaunch: error: nested launch: MALAUNCH_CONTEXT, TORCHELASTIC_RUN_ID "
        "and GROUP_RANK are "
        "set, so this runs inside a malaunch worker that already has its rank; run the command "
        "itself there, or start a separate job on purpose with --topology local"
    ) in result.stdout
