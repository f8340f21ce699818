"""`malaunch --dry-run` on a MindX ascend-operator AscendJob pod (mindspore, MS_* variables)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from malaunch.testing import clean_env, read_env_file, run_cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "shared" / "mindx_operator_mindspore_env.env"
NAMES = ("MS_ROLE", "MS_NODE_ID", "MS_WORKER_NUM", "MS_SCHED_HOST", "MS_SCHED_PORT")


def dry_run(env: Dict[str, str]) -> Dict[str, Any]:
    args = ["--framework", "mindspore", "--dry-run", "--", "python", "train.py"]
    result = run_cli(args, env=env)
    assert result.code == 0, result.stderr
    plan: Dict[str, Any] = json.loads(result.stdout)
    return plan


def test_worker_pod_plans_eight_workers_and_no_scheduler() -> None:
    plan = dry_run(clean_env(read_env_file(FIXTURE)))
    assert plan["topology"]["source"] == "mindx"
    assert [p["role"] for p in plan["processes"]] == ["worker"] * 8
    assert [{k: p["env"].get(k) for k in NAMES} for p in plan["processes"]] == [
        {
            "MS_ROLE": "MS_WORKER",
            "MS_NODE_ID": str(rank),
            "MS_WORKER_NUM": "16",
            "MS_SCHED_HOST": "203.0.113.110",
            "MS_SCHED_PORT": "2222",
        }
        for rank in range(8, 16)
    ]
    assert [p["rank"] for p in plan["processes"]] == list(range(8, 16))


def test_scheduler_pod_plans_only_the_scheduler() -> None:
    env = clean_env(read_env_file(FIXTURE))
    env.update(MS_ROLE="MS_SCHED", MS_SCHED_HOST="203.0.113.5")
    del env["MS_NODE_RANK"]
    plan = dry_run(env)
    assert [(p["role"], p["service"]) for p in plan["processes"]] == [("scheduler", False)]
    assert {k: plan["processes"][0]["env"].get(k) for k in NAMES} == {
        "MS_ROLE": "MS_SCHED",
        "MS_NODE_ID": None,
        "MS_WORKER_NUM": "16",
        "MS_SCHED_HOST": "203.0.113.5",
        "MS_SCHED_PORT": "2222",
    }
