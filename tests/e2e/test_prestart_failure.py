"""The first failure before the start stops every node (issue 24): a node launcher that cannot
plan tells the job, and every other launcher ends at once instead of at --wait-timeout.

Node launchers are started one by one from ``malaunch simulate --print-env``'s commands, as on
a cluster, with a framework plugin (a fake distribution) that refuses to plan on one node.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from launchers import Launchers, NodeCommand, node_dir, printed_nodes

from malaunch.testing import clean_env, write_fake_distribution

REFUSER = """\
import click
from malaunch.api import Framework, Integer, LaunchPlan, ProcessSpec, UsageError, hookimpl

def plan(topology, command, options):
    if topology.node_rank == options.framework_options["refuse_on_node"]:
        raise UsageError(f"refuser: node {topology.node_rank} will not plan this job")
    processes = tuple(
        ProcessSpec(role="worker", rank=device.rank, local_rank=index, argv=tuple(command),
                    cwd=options.cwd, log_file=f"{options.log_dir}/worker-{device.rank}.log")
        for index, device in enumerate(topology.local_devices)
    )
    return LaunchPlan(framework="refuser", topology=topology, processes=processes)

@hookimpl
def malaunch_register_frameworks():
    option = click.Option(["--refuse-on-node"], type=Integer(0, 99), default=0)
    return [Framework(name="refuser", plan=plan, options=[option])]
"""
WAIT_TIMEOUT = 120  # what the launchers would wait for a node that never tells them
# Well under --wait-timeout: ending by then shows the launchers were told, not timed out.
TOLD_WITHIN = 30.0


def refusing_nodes(tmp_path: Path, count: int, refuse_on: int) -> List[NodeCommand]:
    site = tmp_path / "site"
    write_fake_distribution(site, "malaunch-refuser", "1.0", {"refuser": "fake_refuser"},
                            {"fake_refuser": REFUSER})  # fmt: skip
    args = [
        "--nodes", str(count), "--platform", "volcano", "--framework", "refuser",
        "--refuse-on-node", str(refuse_on), "--wait-timeout", str(WAIT_TIMEOUT),
        "--log-dir", str(tmp_path / "logs"),
        "--", sys.executable, "-c", "import time; time.sleep(60)",
    ]  # fmt: skip
    env = clean_env({"PYTHONPATH": str(site)})
    nodes = printed_nodes(args, cwd=tmp_path, env=env)
    for node in nodes:
        node.env["PYTHONPATH"] = str(site)
    return nodes


def summary(tmp_path: Path, node: int) -> Dict[str, Any]:
    loaded: Dict[str, Any] = json.loads(
        (node_dir(tmp_path / "logs", node) / "malaunch-summary.json").read_text()
    )
    return loaded


def refusal(node: int) -> Dict[str, Any]:
    reason = f"refuser: node {node} will not plan this job"
    return {"kind": "prestart", "node": node, "rank": None, "code": 64, "reason": reason}


def assert_stopped_by(tmp_path: Path, nodes: List[int], failure: Dict[str, Any]) -> None:
    for node in nodes:
        report = summary(tmp_path, node)
        assert (report["exit_code"], report["stopped_by"]) == (75, failure)
        assert report["processes"] == []


def test_a_refusal_on_node_0_stops_the_nodes_waiting_and_those_that_join_later(
    tmp_path: Path,
) -> None:
    nodes = refusing_nodes(tmp_path, 3, refuse_on=0)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(1)  # waits for node 0
        started = time.time()
        launchers.start(0)
        assert launchers.wait(TOLD_WITHIN, only=[1]) == {1: 75}, launchers.output()
        assert launchers.procs[0].poll() is None  # node 0 stays to tell node 2
        late = time.time()
        launchers.start(2)
        codes = launchers.wait(TOLD_WITHIN)
    assert codes == {0: 64, 1: 75, 2: 75}, launchers.output()
    assert launchers.ended[1] - started < TOLD_WITHIN
    assert launchers.ended[2] - late < TOLD_WITHIN
    assert launchers.output(0).splitlines()[-1] == (
        "malaunch: error: refuser: node 0 will not plan this job"
    )
    said = (
        "malaunch: warning: node 0's launcher failed before the start with exit code 64: "
        "refuser: node 0 will not plan this job: stopping"
    )
    for node in (1, 2):
        assert said in launchers.output(node).splitlines()
    assert_stopped_by(tmp_path, [1, 2], refusal(0))


def test_a_refusal_on_node_1_is_told_to_node_0_which_ends_the_job(tmp_path: Path) -> None:
    nodes = refusing_nodes(tmp_path, 3, refuse_on=1)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(0)
        started = time.time()
        launchers.start(1)
        assert launchers.wait(TOLD_WITHIN, only=[1]) == {1: 64}, launchers.output()
        late = time.time()
        launchers.start(2)
        codes = launchers.wait(TOLD_WITHIN)
    assert codes == {0: 75, 1: 64, 2: 75}, launchers.output()
    assert launchers.ended[1] - started < TOLD_WITHIN
    assert max(launchers.ended[0], launchers.ended[2]) - late < TOLD_WITHIN
    assert launchers.output(1).splitlines()[-1] == (
        "malaunch: error: refuser: node 1 will not plan this job"
    )
    # Node 1 left once node 0 had answered: no lost node, no error line on node 0.
    assert "error" not in launchers.output(0)
    assert_stopped_by(tmp_path, [0, 2], refusal(1))


def test_node_0_telling_the_nodes_to_come_leaves_on_sigterm(tmp_path: Path) -> None:
    nodes = refusing_nodes(tmp_path, 3, refuse_on=1)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(0)
        launchers.start(1)
        assert launchers.wait(TOLD_WITHIN, only=[1]) == {1: 64}, launchers.output()
        assert launchers.procs[0].poll() is None  # it waits to tell node 2
        launchers.procs[0].send_signal(signal.SIGTERM)
        assert launchers.wait(TOLD_WITHIN, only=[0]) == {0: 75}, launchers.output()


def test_a_node_that_cannot_reach_node_0_still_exits_with_its_own_error(tmp_path: Path) -> None:
    nodes = refusing_nodes(tmp_path, 2, refuse_on=1)
    for node in nodes:  # node 0 never comes: node 1 tries to tell it for --wait-timeout only
        node.argv[node.argv.index("--wait-timeout") + 1] = "1"
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(1)
        assert launchers.wait(TOLD_WITHIN) == {1: 64}
    lines = launchers.output(1).splitlines()
    assert lines[-1] == "malaunch: error: refuser: node 1 will not plan this job"
    assert lines[-2].startswith(
        "malaunch: warning: could not tell node 0 why this node cannot start: node 0's "
        "launcher at 127.0.0.1:"
    )


def test_node_0_that_refused_leaves_on_sigterm_with_its_own_error(tmp_path: Path) -> None:
    nodes = refusing_nodes(tmp_path, 2, refuse_on=0)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(0)
        deadline = time.monotonic() + TOLD_WITHIN
        while "telling the job" not in launchers.output(0) and time.monotonic() < deadline:
            time.sleep(0.05)  # it said why at once, and waits for node 1 to join
        launchers.procs[0].send_signal(signal.SIGTERM)
        assert launchers.wait(TOLD_WITHIN) == {0: 64}, launchers.output()
    assert launchers.output(0).splitlines()[1:] == [  # after the "--- node 0 ---" header
        "malaunch: warning: this node cannot start (refuser: node 0 will not plan this job): "
        "telling the job",
        "malaunch: warning: signalled: the node launchers still to join go untold",
        "malaunch: error: refuser: node 0 will not plan this job",
    ]
