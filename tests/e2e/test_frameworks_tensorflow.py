"""Real TensorFlow parameter-server jobs (CPU) on a simulated ModelArts TF PS cluster.

``--platform tf-ps`` gives each task its own node (1 ps + 2 workers) with ``TF_PS_HOSTS``,
``TF_WORKER_HOSTS``, ``MA_TASK_NAME`` and ``VC_TASK_INDEX``; the ``tensorflow_ps`` plugin hands
them to the scripts as flags and ``TF_CONFIG``. Needs ``pip install '.[tensorflow]'``: without
TensorFlow these tests fail, they do not skip.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from malaunch.testing import CliResult, run_cli, run_dir

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _tensorflow_installed() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        msg = f"tensorflow is not installed in {sys.executable}: pip install '.[tensorflow]'"
        pytest.fail(msg)


def simulate(tmp_path: Path, script: str) -> CliResult:
    args = [
        "simulate", "--nodes", "2", "--num-ps", "1", "--platform", "tf-ps",
        "--framework", "tensorflow_ps", "--log-dir", str(tmp_path / "logs"),
        "--", sys.executable, script, "--steps", "20",
    ]  # fmt: skip
    return run_cli(args, cwd=REPO, timeout=240)


def node_rows(tmp_path: Path) -> Dict[int, Dict[str, Any]]:
    summary = json.loads((run_dir(tmp_path / "logs") / "malaunch-summary.json").read_text())
    assert summary["exit_code"] == 0
    assert summary["first_failure"] is None
    return {row["rank"]: row for row in summary["processes"]}


def lines_of(result: CliResult, node: int) -> List[str]:
    prefix = f"[node {node}] "
    return [line[len(prefix) :] for line in result.stdout.splitlines() if line.startswith(prefix)]


def assert_ps_node_finished_by_the_job(tmp_path: Path) -> None:
    """The ps runs server.join() forever: once both workers' launchers reported their workers
    done, node 0 told the ps node to finish; every node launcher then exited 0 by itself."""
    rows = node_rows(tmp_path)
    assert [rows[node]["exit_code"] for node in range(3)] == [0, 0, 0]
    ps_node = json.loads(
        (run_dir(tmp_path / "logs") / "node-0" / "malaunch-summary.json").read_text()
    )
    (ps,) = ps_node["processes"]
    assert (ps["role"], ps["service"], ps["signal"], ps_node["exit_code"]) == (
        "ps",
        True,
        "SIGTERM",
        0,
    )


def test_tf1_ps_applies_every_workers_updates_on_the_ps(tmp_path: Path) -> None:
    result = simulate(tmp_path, "examples/tf_ps_train.py")
    assert result.code == 0, result.stdout + result.stderr
    for node, index in ((1, 0), (2, 1)):
        assert f"[rank {index}] worker {index}/2: global_step on ps=40 ok" in lines_of(result, node)
    assert "[ps 0] ps 0: serving at grpc://127.0.0.1:" in "\n".join(lines_of(result, 0))
    assert_ps_node_finished_by_the_job(tmp_path)


def test_tf2_parameter_server_strategy_from_tf_config(tmp_path: Path) -> None:
    result = simulate(tmp_path, "examples/tf_ps_tf2_train.py")
    assert result.code == 0, result.stdout + result.stderr
    coordinator = lines_of(result, 1)  # worker 0 coordinates
    assert "[rank 0] coordinator: variables on ['/job:ps/replica:0/task:0/device:CPU:0']" in (
        coordinator
    )
    assert any(
        line.startswith("[rank 0] coordinator: steps applied on ps=20 ") and line.endswith(" ok")
        for line in coordinator
    )
    assert "[rank 1] worker 0: coordinator finished; exiting" in lines_of(result, 2)
    assert_ps_node_finished_by_the_job(tmp_path)
