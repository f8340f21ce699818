"""Real PyTorch DDP jobs (gloo, CPU) on two simulated Octopus nodes: examples/torch_ddp_train.py.

Needs torch in the interpreter running the tests (``pip install '.[torch]'``): without it
these tests fail, they do not skip.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any, List, Sequence

import pytest
from launchers import Launchers, node_dir, printed_nodes

from malaunch.testing import read_summary, run_cli, run_dir, wait_gone

pytestmark = [pytest.mark.frameworks, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "examples/torch_ddp_train.py"


@pytest.fixture(autouse=True)
def _torch_installed() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.fail(f"torch is not installed in {sys.executable}: pip install '.[torch]'")


def simulate(tmp_path: Path, *script_args: str, grace: str = "5") -> Any:
    args = [
        "simulate", "--nodes", "2", "--nproc-per-node", "2", "--platform", "octopus",
        "--framework", "torch_ddp", "--grace-period", grace, "--log-dir", str(tmp_path / "logs"),
        "--", sys.executable, SCRIPT, *script_args,
    ]  # fmt: skip
    return run_cli(args, cwd=REPO, timeout=240)


def assert_all_gone(pids: Sequence[int]) -> None:
    assert wait_gone(pids) == []  # bounded: init reaps orphans asynchronously


def test_ddp_on_two_nodes_trains_to_identical_parameters(tmp_path: Path) -> None:
    result = simulate(tmp_path)
    assert result.code == 0, result.stdout + result.stderr
    pattern = re.compile(
        r"^\[node (\d)\] \[rank (\d)\] rank (\d)/4 \(local (\d)\): allreduce=10\.0 ok; "
        r"params checksum=(\S+) identical$"
    )
    found: List[re.Match[str]] = []
    for line in result.stdout.splitlines():
        match = pattern.match(line)
        if match:
            found.append(match)
    assert sorted(int(m.group(3)) for m in found) == [0, 1, 2, 3]
    for match in found:
        node, prefix_rank, rank, local = (int(match.group(i)) for i in range(1, 5))
        assert (node, prefix_rank, local) == (rank // 2, rank, rank % 2)
    assert len({m.group(5) for m in found}) == 1  # the same weights on every rank
    for rank in range(4):  # the seconds torch takes to import are said, not a silent wait
        first = next(line for line in result.stdout.splitlines() if f"[rank {rank}] " in line)
        assert first == f"[node {rank // 2}] [rank {rank}] rank {rank}/4: importing torch"
    assert read_summary(tmp_path / "logs")["exit_code"] == 0
    for node in (0, 1):
        inner = read_summary(run_dir(tmp_path / "logs") / f"node-{node}")
        assert [(p["rank"], p["exit_code"]) for p in inner["processes"]] == [
            (2 * node, 0),
            (2 * node + 1, 0),
        ]


def test_a_rank_crashing_on_node_1_stops_the_whole_job_with_its_code(tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    result = simulate(
        tmp_path, "--crash-rank", "3", "--crash-step", "2", "--crash-code", "7",
        "--pid-dir", str(pid_dir), grace="2",
    )  # fmt: skip
    assert result.code == 7, result.stdout + result.stderr
    assert "[node 1] [rank 3] rank 3/4 (local 1): crashing at step 2 with code 7" in result.stdout
    outer = read_summary(tmp_path / "logs")
    assert (outer["first_failure"]["role"], outer["first_failure"]["rank"]) == ("node", 1)
    # The other ranks stall at step 2 for 300 s unless stopped: the launchers stopped them.
    node0 = read_summary(run_dir(tmp_path / "logs") / "node-0")
    assert [p["signal"] for p in node0["processes"]] == ["SIGTERM", "SIGTERM"]
    node1 = read_summary(run_dir(tmp_path / "logs") / "node-1")
    assert (node1["first_failure"]["rank"], node1["first_failure"]["exit_code"]) == (3, 7)
    workers = [int(path.read_text()) for path in pid_dir.glob("rank*.pid")]
    assert len(workers) == 4
    assert_all_gone(workers + [p["pid"] for p in outer["processes"]])


def test_hang_in_a_real_gloo_job_is_found_and_rank_1_named(tmp_path: Path) -> None:
    """SPEC §9 / issue (b): 2 x 2 ranks, rank 1 stalls inside stall_in_data_loading, the
    others wait in all_reduce. Node launchers started one by one, as on a cluster."""
    out = tmp_path / "out"
    out.mkdir()
    args = [
        "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano",
        "--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs"),
        "--platform-dir", str(tmp_path / "platform"), "--console-ranks", "none",
        "--hang-timeout", "3", "--hang-startup-timeout", "180",
        "--", sys.executable, str(REPO / "tests" / "workers" / "torch_hang.py"), str(out),
    ]  # fmt: skip
    with Launchers(printed_nodes(args, cwd=tmp_path), tmp_path, tmp_path / "launchers") as nodes:
        nodes.start_all()
        codes = nodes.wait(timeout=240)
        output = nodes.output()
    assert codes == {0: 124, 1: 75}, output
    report = json.loads((node_dir(tmp_path / "logs", 0) / "malaunch-summary.json").read_text())
    hang = report["hang"]
    assert (hang["node"], hang["rank"], hang["culprits"]) == (0, 1, [1])
    stacks = {
        rank: node_dir(tmp_path / "logs", rank // 2) / "stacks" / "attempt-0" / f"rank-{rank}.txt"
        for rank in range(4)
    }
    assert "stall_in_data_loading" in stacks[1].read_text()
    for rank in (0, 2, 3):
        text = stacks[rank].read_text()
        assert "all_reduce" in text and "stall_in_data_loading" not in text
    assert_all_gone([int(p.read_text()) for p in out.glob("*.pid")])
