"""``malaunch simulate`` on the Kubernetes operators' platforms (pytorchjob, volcano-pytorch,
ascendjob): each pod's environment comes from ``malaunch render``'s manifest, and a real
multi-node job of plain-Python workers gets every rank once."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from malaunch.testing import run_cli

WORKER = """\
import json, os, pathlib, sys
out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
(out / f"rank{os.environ['RANK']}.json").write_text(json.dumps({k: os.environ[k] for k in keys}))
"""


def print_env(tmp_path: Path, platform: str, nodes: int) -> List[Dict[str, str]]:
    args = ["simulate", "--print-env", "--platform", platform, "--nodes", str(nodes),
            "--nproc-per-node", "2", "--framework", "torch_ddp", "--log-dir", str(tmp_path),
            "--", "python", "train.py"]  # fmt: skip
    result = run_cli(args)
    assert result.code == 0, result.stderr
    found: List[Dict[str, str]] = []
    for line in result.stdout.splitlines():
        if line.startswith("# node "):
            found.append({"#": line})
        elif line.startswith("# launcher: "):
            found[-1]["#launcher"] = line
        elif line and not line.startswith("#"):
            key, _, value = shlex.split(line)[0].partition("=")  # quoted for a shell
            found[-1][key] = value
    return found


def test_pytorchjob_pods_get_kubeflow_variables(tmp_path: Path) -> None:
    nodes = print_env(tmp_path, "pytorchjob", 2)
    assert [n["#"].split(" at ")[0] for n in nodes] == ["# node 0: master 0", "# node 1: worker 0"]
    worker = nodes[1]
    assert (worker["PET_NNODES"], worker["PET_NODE_RANK"], worker["RANK"]) == ("2", "1", "1")
    assert (worker["PET_NPROC_PER_NODE"], worker["WORLD_SIZE"]) == ("2", "4")
    assert worker["MASTER_ADDR"] == worker["PET_MASTER_ADDR"] == "127.0.0.1"
    assert worker["HOSTNAME"].endswith("-worker-0")


def test_volcano_pytorch_pods_get_both_tasks(tmp_path: Path) -> None:
    nodes = print_env(tmp_path, "volcano-pytorch", 3)
    assert nodes[2]["VC_MASTER_HOSTS"] == "127.0.0.1"
    assert nodes[2]["VC_WORKER_HOSTS"] == "127.0.0.2,127.0.0.3"
    assert (nodes[2]["VC_TASK_INDEX"], nodes[2]["RANK"], nodes[2]["WORLD_SIZE"]) == ("1", "2", "3")
    assert "--nproc-per-node 2" in nodes[2]["#launcher"]


def test_ascendjob_pods_get_mindx_variables(tmp_path: Path) -> None:
    nodes = print_env(tmp_path, "ascendjob", 2)
    worker = nodes[1]
    assert (worker["RANK"], worker["WORLD_SIZE"], worker["LOCAL_WORLD_SIZE"]) == ("1", "4", "2")
    assert worker["LOCAL_RANK"] == "0,1"
    assert worker["MASTER_ADDR"] == "127.0.0.1"


@pytest.mark.parametrize("platform", ["pytorchjob", "volcano-pytorch", "ascendjob"])
def test_a_two_node_job_runs_every_rank_once(tmp_path: Path, platform: str) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    out = tmp_path / "out"
    args = ["simulate", "--platform", platform, "--nodes", "2", "--nproc-per-node", "2",
            "--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs"),
            "--", sys.executable, str(script), str(out)]  # fmt: skip
    result = run_cli(args, timeout=120)
    assert result.code == 0, result.stdout + result.stderr
    seen = {int(p.stem[4:]): json.loads(p.read_text()) for p in out.glob("rank*.json")}
    assert sorted(seen) == [0, 1, 2, 3]
    # Recomputed per process: never the platform's node RANK, process WORLD_SIZE or rank list.
    assert [seen[r]["WORLD_SIZE"] for r in range(4)] == ["4"] * 4
    assert [seen[r]["GROUP_RANK"] for r in range(4)] == ["0", "0", "1", "1"]
    assert [seen[r]["LOCAL_RANK"] for r in range(4)] == ["0", "1", "0", "1"]
    assert {seen[r]["MASTER_ADDR"] for r in range(4)} == {"127.0.0.1"}
