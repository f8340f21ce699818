"""The slurm source through the installed command: ``malaunch topology`` and ``--dry-run``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from malaunch.testing import clean_env, read_env_file, run_cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "shared" / "slurm_env_example.env"


@pytest.fixture
def env(tmp_path: Path) -> Dict[str, str]:
    """The fixture's node (node03) as the one launcher of its node, /etc/volcano kept out."""
    return clean_env(
        {**read_env_file(FIXTURE), "SLURM_LOCALID": "0", "MALAUNCH_VOLCANO_DIR": str(tmp_path)}
    )


def test_topology_json(env: Dict[str, str]) -> None:
    result = run_cli(["topology", "--json"], env=env)
    assert result.code == 0, result.stderr
    topo: Dict[str, Any] = json.loads(result.stdout)
    assert topo["source"] == "slurm"
    assert [n["host"] for n in topo["nodes"]] == ["node01", "node02", "node03", "node04", "node07"]
    assert topo["node_rank"] == 2
    assert [d["rank"] for d in topo["nodes"][2]["devices"]] == list(range(16, 24))
    assert topo["master_addr"] == "node01"
    assert topo["job_id"] == "123456"


def test_second_launcher_on_a_node_is_refused(env: Dict[str, str]) -> None:
    env["SLURM_LOCALID"] = "1"
    result = run_cli(["topology"], env=env)
    assert result.code == 65
    assert "SLURM_LOCALID=1: malaunch must run once per node" in result.stderr
    assert "srun --ntasks-per-node=1" in result.stderr


def test_torch_ddp_dry_run(env: Dict[str, str]) -> None:
    args = ["--framework", "torch_ddp", "--dry-run", "--", "python", "train.py"]
    result = run_cli(args, env=env)
    assert result.code == 0, result.stderr
    plan: Dict[str, Any] = json.loads(result.stdout)
    processes = plan["processes"]
    assert [p["env"]["RANK"] for p in processes] == [str(r) for r in range(16, 24)]
    assert [p["env"]["LOCAL_RANK"] for p in processes] == [str(r) for r in range(8)]
    assert {p["env"]["WORLD_SIZE"] for p in processes} == {"40"}
    assert {p["env"]["MASTER_ADDR"] for p in processes} == {"node01"}
