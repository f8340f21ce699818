"""When a job has succeeded, through the installed command with standard-library tasks shaped like
TF2's (tests/workers/tf_like_task.py: the chief works and ends, workers and ps serve until
stopped): the chief success policy on a simulated ``tf-ps`` cluster with a chief, ``all-workers``
overriding it, and a ps-only node without the job channel, which serves on until signalled.
The real TensorFlow job is in test_frameworks_contracts.py."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any, Dict, List

from launchers import Launchers, node_dir, printed_nodes, recorded_pids

from malaunch.testing import run_cli, wait_gone

TASK = Path(__file__).parents[1] / "workers" / "tf_like_task.py"


def simulate_args(tmp_path: Path, *extra: str) -> List[str]:
    (tmp_path / "out").mkdir(exist_ok=True)
    return [
        "--nodes", "2", "--num-ps", "1", "--platform", "tf-ps", "--framework", "tensorflow_ps",
        "--log-dir", str(tmp_path / "logs"), *extra, "--", sys.executable, "-S", str(TASK),
        str(tmp_path / "out"),
    ]  # fmt: skip


def node_summary(tmp_path: Path, node: int) -> Dict[str, Any]:
    path = node_dir(tmp_path / "logs", node) / "malaunch-summary.json"
    loaded: Dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_with_a_chief_the_job_succeeds_when_the_chief_does(tmp_path: Path) -> None:
    result = run_cli(["simulate", "--chief", *simulate_args(tmp_path)], timeout=120)
    assert result.code == 0, result.stdout + result.stderr
    out = tmp_path / "out"
    assert sorted(p.name for p in out.glob("*.done")) == ["chief-0.done"]
    # node 0 = chief, 1 = ps, 2 and 3 = workers: each launcher exited 0, its serving task
    # stopped by the job once the chief had succeeded
    for node, role in ((1, "ps"), (2, "worker"), (3, "worker")):
        summary = node_summary(tmp_path, node)
        (process,) = summary["processes"]
        assert (summary["exit_code"], process["role"], process["signal"]) == (0, role, "SIGTERM")
        decision = summary["attempts"][0]["decision"]
        assert decision == "the chief succeeded (--success-policy chief)"
    chief = node_summary(tmp_path, 0)
    assert (chief["exit_code"], chief["processes"][0]["exit_code"]) == (0, 0)
    assert "the chief succeeded (--success-policy chief); stopping 1 process" in result.stdout
    assert wait_gone(recorded_pids(out)) == []


def test_all_workers_overrides_the_chief(tmp_path: Path) -> None:
    args = simulate_args(tmp_path, "--success-policy", "all-workers")
    result = run_cli(["simulate", "--chief", *args, "--worker-seconds", "2"], timeout=120)
    assert result.code == 0, result.stdout + result.stderr
    done = sorted(p.name for p in (tmp_path / "out").glob("*.done"))
    assert done == ["chief-0.done", "worker-0.done", "worker-1.done"]  # the workers finished
    ps = node_summary(tmp_path, 1)
    assert ps["processes"][0]["signal"] == "SIGTERM"
    assert ps["attempts"][0]["decision"] == "every worker of the job succeeded"


def test_chief_policy_without_a_chief_is_refused(tmp_path: Path) -> None:
    args = simulate_args(tmp_path, "--success-policy", "chief")
    nodes = printed_nodes(args, cwd=tmp_path)
    result = run_cli(["--dry-run", *nodes[0].argv[1:]], env={**nodes[0].env}, cwd=tmp_path)
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: --success-policy chief: the cluster has no chief (topology source "
        "'tf-ps', roles: ps, worker); use all-workers\n"
    )


def test_without_the_channel_a_ps_only_node_serves_until_signalled(tmp_path: Path) -> None:
    """Before: the ps node decided at once that every worker of the job had succeeded (it has
    none of its own) and stopped its ps after 0.04 s, while the workers elsewhere still ran."""
    args = simulate_args(tmp_path, "--no-job-channel")
    nodes = printed_nodes([*args, "--worker-seconds", "3"], cwd=tmp_path)
    out = tmp_path / "out"
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        codes = launchers.wait(timeout=60, only=[1, 2])  # the worker nodes end by themselves
        assert codes == {1: 0, 2: 0}, launchers.output()
        assert (out / "worker-0.done").exists() and (out / "worker-1.done").exists()
        # the ps node still serves: its launcher and its ps are up after every worker ended
        assert launchers.procs[0].poll() is None, launchers.output(0)
        ps_pid = int((out / "ps-0.pid").read_text())
        assert wait_gone([ps_pid], timeout=0.5) == [ps_pid]
        launchers.procs[0].send_signal(signal.SIGTERM)
        codes = launchers.wait(timeout=30, only=[0])
        output = launchers.output(0)
    assert codes == {0: 128 + signal.SIGTERM}, output
    assert wait_gone(recorded_pids(out)) == []
    summary = node_summary(tmp_path, 0)
    assert summary["processes"][0]["signal"] == "SIGTERM"
    assert "ps-0 done" not in output
