"""A real MindSpore dynamic-cluster job (CPU) on two simulated Volcano nodes x 2 workers.

Node 0's launcher also runs the scheduler (``MS_ROLE=MS_SCHED``); every process gets the same
``MS_SCHED_HOST``/``MS_SCHED_PORT``/``MS_WORKER_NUM``. Rank-table mode (HCCL) cannot run
without NPUs; its environment is checked in ``test_simulate.py``. Needs
``pip install '.[mindspore]'``: without MindSpore this test fails, it does not skip.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from malaunch.testing import run_cli, run_dir

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(400)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _mindspore_installed() -> None:
    if importlib.util.find_spec("mindspore") is None:
        msg = f"mindspore is not installed in {sys.executable}: pip install '.[mindspore]'"
        pytest.fail(msg)


def test_dynamic_cluster_all_reduce_gives_the_sum_on_every_rank(tmp_path: Path) -> None:
    args = [
        "simulate", "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano",
        "--framework", "mindspore", "--ms-topo-timeout", "120",
        "--log-dir", str(tmp_path / "logs"),
        "--", sys.executable, "examples/mindspore_dynamic_train.py",
    ]  # fmt: skip
    result = run_cli(args, cwd=REPO, timeout=360)
    assert result.code == 0, result.stdout + result.stderr
    pattern = re.compile(
        r"^\[node (\d)\] \[rank (\d)\] rank (\d)/4 \(MS_NODE_ID (\d)\): "
        r"allreduce=10\.0 expected 10\.0 ok$"
    )
    found = [m.groups() for m in map(pattern.match, result.stdout.splitlines()) if m]
    assert sorted(found) == [(str(r // 2), str(r), str(r), str(r)) for r in range(4)]
    summary = json.loads(
        (run_dir(tmp_path / "logs") / "node-0" / "malaunch-summary.json").read_text()
    )
    assert [p["role"] for p in summary["processes"]] == ["scheduler", "worker", "worker"]
    assert [p["exit_code"] for p in summary["processes"][1:]] == [0, 0]
    outer = json.loads((run_dir(tmp_path / "logs") / "malaunch-summary.json").read_text())
    assert [(p["rank"], p["exit_code"]) for p in outer["processes"]] == [(0, 0), (1, 0)]
