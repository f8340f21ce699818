"""Lose a node, keep the job (SPEC §9 "Replacement"), with node launchers started one by one
from ``simulate --print-env``'s commands, as on a cluster, over real sockets on loopback.

A lost node launcher is SIGKILLed, then its printed command is run again, as a kubelet or an
operator would recreate its pod. The healthy launchers must never exit meanwhile, and the
next attempt must run on every node.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

from launchers import Launchers, NodeCommand, node_dir, option, printed_nodes, recorded_pids
from test_job_channel import FakeNode0

from malaunch.testing import run_cli, wait_gone

WORKER = Path(__file__).parents[1] / "workers" / "job_worker.py"
TF_TASK = Path(__file__).parents[1] / "workers" / "tf_like_task.py"


def nodes_of(
    tmp_path: Path, nodes: int, launcher: Sequence[str], steps: int = 40
) -> List[NodeCommand]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    args = [
        "--nodes", str(nodes), "--nproc-per-node", "2", "--platform", "volcano",
        "--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs"),
        "--platform-dir", str(tmp_path / "platform"), "--console-ranks", "none", *launcher,
        "--", sys.executable, str(WORKER), str(out), "--steps", str(steps),
    ]  # fmt: skip
    return printed_nodes(args, cwd=tmp_path)


def summary(tmp_path: Path, node: int) -> Dict[str, Any]:
    path = node_dir(tmp_path / "logs", node) / "malaunch-summary.json"
    loaded: Dict[str, Any] = json.loads(path.read_text())
    return loaded


def started(tmp_path: Path, attempt: int) -> List[str]:
    return sorted(p.stem for p in (tmp_path / "out").glob(f"worker-*-{attempt}.pid"))


def wait_for(condition: Any, what: str, launchers: Launchers, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: {launchers.output()}"
        time.sleep(0.02)


def kill_and_replace(
    launchers: Launchers, tmp_path: Path, node: int, nnodes: int, delay: float = 3.0
) -> None:
    """Once every rank of attempt 0 runs: SIGKILL node ``node``'s launcher, and run its
    command again ``delay`` seconds later; the others must all be up meanwhile."""
    wait_for(lambda: len(started(tmp_path, 0)) == 2 * nnodes, "attempt 0", launchers)
    launchers.procs[node].kill()
    launchers.procs[node].wait(timeout=10)
    time.sleep(delay)
    others = [i for i in range(nnodes) if i != node]
    assert [launchers.procs[i].poll() for i in others] == [None] * len(others), launchers.output()
    launchers.start(node)


def assert_attempt_1_everywhere(tmp_path: Path, nnodes: int) -> None:
    assert started(tmp_path, 1) == [f"worker-{rank}-1" for rank in range(2 * nnodes)]
    assert sorted(p.name for p in (tmp_path / "out").glob("ok-*")) == [
        f"ok-{rank}-1" for rank in range(2 * nnodes)
    ]
    assert wait_gone(recorded_pids(tmp_path / "out")) == []


def test_a_a_killed_node_is_replaced_and_the_job_goes_on(tmp_path: Path) -> None:
    """(a) Node 2's launcher is SIGKILLed in attempt 0 and started again 3 s later."""
    nodes = nodes_of(tmp_path, 3, ["--max-restarts", "2"])
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        kill_and_replace(launchers, tmp_path, node=2, nnodes=3)
        codes = launchers.wait(timeout=90)
        output = launchers.output()
    assert codes == {0: 0, 1: 0, 2: 0}, output
    assert_attempt_1_everywhere(tmp_path, 3)
    for index in (0, 1):
        assert "node 2 lost: waiting up to 600s for its replacement" in launchers.output(index)
        report = summary(tmp_path, index)
        assert (report["exit_code"], report["restarts"]) == (0, 1)
        first, second = report["attempts"]
        assert (first["failure"]["kind"], first["failure"]["node"]) == ("lost", 2)
        assert first["decision"] == "restart 1 of 2: waiting up to 600s for node 2's replacement"
        [loss] = first["losses"]
        assert (loss["node"], loss["rejoin_seconds"] >= 3.0) == (2, True)
        assert second["losses"] == [] and second["failure"] is None
    assert "node 2's replacement joined" in launchers.output(0)
    # `malaunch report` of the three launchers' log dirs (logs/node-<k>/, each with its runs)
    page = tmp_path / "report.html"
    made = run_cli(["report", str(tmp_path / "logs"), "--html", str(page)], timeout=60)
    assert made.code == 0, made.stderr
    assert "(logs: 3 nodes, " in made.stdout
    html = page.read_text()
    assert "node 2 lost at " in html and "node 2 rejoined at " in html


def test_a_frozen_node_is_lost_by_its_silence_and_replaced(tmp_path: Path) -> None:
    """The other trigger: a node that freezes (SIGSTOP: a machine that hangs, a network that
    goes away) closes nothing; node 0 finds it lost when its heartbeats stop, and waits for
    its replacement as for a killed one. The frozen launcher is then killed, as its pod is
    deleted, and its command started again."""
    launcher = ["--max-restarts", "1", "--heartbeat-timeout", "2"]
    nodes = nodes_of(tmp_path, 3, launcher, steps=100)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for(lambda: len(started(tmp_path, 0)) == 6, "attempt 0", launchers)
        launchers.procs[2].send_signal(signal.SIGSTOP)
        waiting = "node 2 lost: waiting up to 600s for its replacement"
        wait_for(lambda: waiting in launchers.output(1), "the wait", launchers)
        assert [launchers.procs[i].poll() for i in (0, 1)] == [None, None]
        launchers.procs[2].kill()
        launchers.procs[2].wait(timeout=10)
        launchers.start(2)
        codes = launchers.wait(timeout=90)
        output = launchers.output()
    assert codes == {0: 0, 1: 0, 2: 0}, output
    assert "job channel: lost node 2's launcher (no heartbeat for " in launchers.output(0)
    assert_attempt_1_everywhere(tmp_path, 3)
    first = summary(tmp_path, 1)["attempts"][0]
    assert (first["failure"]["kind"], first["failure"]["node"]) == ("lost", 2)
    assert first["losses"][0]["node"] == 2 and first["losses"][0]["rejoin_seconds"] > 0


def test_b_node_0_is_replaced_and_adopts_the_job(tmp_path: Path) -> None:
    """(b) Node 0's launcher is SIGKILLed in attempt 0 and started again 3 s later: the
    survivors wait and redial; the new node 0 adopts attempt 0 and the budget, and starts
    attempt 1 (restart 1 of 2)."""
    nodes = nodes_of(tmp_path, 3, ["--max-restarts", "2"])
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        kill_and_replace(launchers, tmp_path, node=0, nnodes=3)
        codes = launchers.wait(timeout=90)
        output = launchers.output()
    assert codes == {0: 0, 1: 0, 2: 0}, output
    assert_attempt_1_everywhere(tmp_path, 3)
    for index in (1, 2):
        assert "node 0 lost: waiting up to 600s for its replacement" in launchers.output(index)
        report = summary(tmp_path, index)
        assert (report["exit_code"], report["restarts"]) == (0, 1)
        first = report["attempts"][0]
        assert (first["failure"]["kind"], first["failure"]["node"]) == ("lost", 0)
        assert first["losses"][0]["node"] == 0 and first["losses"][0]["rejoin_seconds"] >= 3.0
    new_0 = summary(tmp_path, 0)
    assert (new_0["restarts"], [a["attempt"] for a in new_0["attempts"]]) == (1, [1])
    assert "node 0 replaced: the job goes on from attempt 0 (restart 1 of 2: node 0 was " in (
        launchers.output(0)
    )


def test_c_a_replacement_that_never_comes_ends_the_job(tmp_path: Path) -> None:
    """(c) Node 1 is killed and never comes back: 75 on the others at --rejoin-timeout, the
    summary saying so."""
    nodes = nodes_of(tmp_path, 3, ["--max-restarts", "2", "--rejoin-timeout", "4"], steps=1000)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for(lambda: len(started(tmp_path, 0)) == 6, "attempt 0", launchers)
        launchers.procs[1].kill()
        # The ranks run 1,000 steps: a 75 within this wait is the job given up on.
        codes = launchers.wait(timeout=60, only=[0, 2])
    assert codes == {0: 75, 2: 75}, launchers.output()
    for index in (0, 2):
        report = summary(tmp_path, index)
        assert report["stopped_by"]["reason"] == (
            "its replacement did not join within --rejoin-timeout 4s"
        )
        [attempt] = report["attempts"]
        assert attempt["decision"] == "node 1 never came back within --rejoin-timeout 4s"
        assert attempt["losses"][0]["node"] == 1 and attempt["losses"][0]["rejoin_seconds"] is None
    assert wait_gone(recorded_pids(tmp_path / "out")) == []


def test_d_a_node_lost_after_the_last_restart_ends_the_job(tmp_path: Path) -> None:
    """(d) --max-restarts 0: a lost node ends the job at once, as before replacement."""
    nodes = nodes_of(tmp_path, 3, [], steps=1000)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for(lambda: len(started(tmp_path, 0)) == 6, "attempt 0", launchers)
        launchers.procs[2].kill()
        codes = launchers.wait(timeout=30, only=[0, 1])
    assert codes == {0: 75, 1: 75}, launchers.output()
    attempt = summary(tmp_path, 0)["attempts"][0]
    assert attempt["decision"] == "no restarts allowed (--max-restarts 0)"
    assert "waiting" not in launchers.output()
    assert wait_gone(recorded_pids(tmp_path / "out")) == []


def test_d_a_node_lost_after_node_0_used_the_last_restart_ends_the_job(tmp_path: Path) -> None:
    """(d) with the budget spent, and (b)'s budget adopted: ``--max-restarts 1``; node 0 is
    killed and replaced in attempt 0 (its replacement adopts the one restart as used), then
    node 2 is lost in attempt 1. A new node 0 that had reset the budget would wait for node
    2's replacement; the job must end at once instead, 75 on the others."""
    nodes = nodes_of(tmp_path, 3, ["--max-restarts", "1"], steps=1000)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        kill_and_replace(launchers, tmp_path, node=0, nnodes=3, delay=1.0)
        wait_for(lambda: len(started(tmp_path, 1)) == 6, "attempt 1", launchers)
        launchers.procs[2].kill()
        codes = launchers.wait(timeout=30, only=[0, 1])
        output = launchers.output()
    assert codes == {0: 75, 1: 75}, output
    assert "node 2 lost" not in output  # nobody waited for a replacement
    for index in (0, 1):
        assert "no restart left: --max-restarts 1 used up" in launchers.output(index)
        last = summary(tmp_path, index)["attempts"][-1]
        assert (last["attempt"], last["failure"]["kind"], last["failure"]["node"]) == (1, "lost", 2)
        assert last["decision"] == "--max-restarts 1 used up"
    assert [a["attempt"] for a in summary(tmp_path, 0)["attempts"]] == [1]  # the new node 0
    assert wait_gone(recorded_pids(tmp_path / "out")) == []


def test_a_replacement_from_a_new_address_moves_every_nodes_plan(tmp_path: Path) -> None:
    """A replaced pod may come back on another machine. TensorFlow tasks dial each other by the
    cluster's addresses, so attempt 1's ``TF_CONFIG`` must name worker 1 where its replacement
    is (127.0.0.9, as its own platform says), on every node, not where it was lost."""
    out = tmp_path / "out"
    out.mkdir()
    args = [
        "--nodes", "2", "--num-ps", "1", "--platform", "tf-ps", "--framework", "tensorflow_ps",
        "--no-tf-flags", "--log-dir", str(tmp_path / "logs"), "--max-restarts", "1",
        "--platform-dir", str(tmp_path / "platform"), "--", sys.executable, "-S",
        str(TF_TASK), str(out), "--worker-seconds", "3",
    ]  # fmt: skip
    nodes = printed_nodes(args, cwd=tmp_path)  # node 0: ps 0; nodes 1 and 2: workers 0 and 1
    old = nodes[2].env["MA_CURRENT_IP"]
    moved = {k: v.replace(old, "127.0.0.9") for k, v in nodes[2].env.items() if old in v}
    assert sorted(moved) == ["MA_CURRENT_HOST_IP", "MA_CURRENT_IP", "TF_WORKER_HOSTS"]
    names = ["ps-0", "worker-0", "worker-1"]
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for(lambda: all(cluster(out, n, 0) for n in names), "attempt 0", launchers)
        launchers.procs[2].kill()
        launchers.procs[2].wait(timeout=10)
        launchers.start(2, moved)
        codes = launchers.wait(timeout=60)
    assert codes == {0: 0, 1: 0, 2: 0}, launchers.output()
    before, after = cluster(out, "ps-0", 0), cluster(out, "ps-0", 1)
    assert before["worker"][1] == f"{old}:{before['worker'][1].split(':')[1]}"
    new_address = moved["TF_WORKER_HOSTS"].split(",")[1]
    assert new_address.startswith("127.0.0.9:")
    assert after == {**before, "worker": [before["worker"][0], new_address]}
    assert cluster(out, "worker-0", 1) == cluster(out, "worker-1", 1) == after
    assert "node 2's replacement joined from 127.0.0.9 after " in launchers.output(0)
    assert wait_gone(recorded_pids(out)) == []


def cluster(out: Path, name: str, attempt: int) -> Dict[str, Any]:
    """The cluster task ``name`` of tf_like_task.py saw in ``attempt`` ({} before it ran)."""
    path = out / f"{name}-{attempt}.cluster.json"
    loaded: Dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    return loaded


class ListeningFakeNode0(FakeNode0):
    """The impostor of test_job_channel, which also records whatever a node sends after its
    hello (a node that trusted the welcome would report the job's state: ``resume``)."""

    def __init__(self, port: int, welcome: Dict[str, Any]) -> None:
        self.after_hello: List[bytes] = []
        super().__init__(port, welcome)

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                conn.sendall(b'{"t":"challenge","nonce":"' + b"ab" * 16 + b'","version":2}\n')
                reader = conn.makefile("rb")
                hello = reader.readline()
                if hello:
                    self.hellos.append(json.loads(hello))
                stop = {"t": "stop", "final": True, "failure": {"kind": "exit", "node": 1}}
                try:
                    conn.sendall(json.dumps(self.welcome).encode() + b"\n")
                    conn.sendall(json.dumps(stop).encode() + b"\n")
                    self.after_hello += [line for line in reader if line.strip()]
                except OSError:
                    pass


def test_e_a_stranger_on_node_0s_port_cannot_adopt_the_job(tmp_path: Path) -> None:
    """(e) While node 0 is gone, a program takes its job port, challenges like node 0 and
    welcomes without proof: the survivors tell it nothing and obey nothing, keep redialling,
    and join the real replacement once the port is free again."""
    nodes = nodes_of(tmp_path, 2, ["--max-restarts", "1"])
    port = int(option(nodes[0].argv, "--job-port"))
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for(lambda: len(started(tmp_path, 0)) == 4, "attempt 0", launchers)
        launchers.procs[0].send_signal(signal.SIGKILL)
        launchers.procs[0].wait(timeout=10)
        fake = ListeningFakeNode0(port, {"t": "welcome", "proof": "0" * 64})
        try:
            wait_for(lambda: len(fake.hellos) >= 2, "the survivor's tries", launchers)
        finally:
            fake.close()
        assert launchers.procs[1].poll() is None, launchers.output()
        launchers.start(0)
        codes = launchers.wait(timeout=90)
    assert codes == {0: 0, 1: 0}, launchers.output()
    assert all(h["t"] == "hello" and h["node"] == 1 for h in fake.hellos)
    assert fake.after_hello == []  # no resume, no job state, ever sent to it
    assert started(tmp_path, 1) == [f"worker-{rank}-1" for rank in range(4)]
    assert summary(tmp_path, 1)["attempts"][0]["failure"]["node"] == 0


def launcher_of(parent: int, node: int) -> int:
    """The pid of node ``node``'s launcher among ``simulate``'s children (from /proc)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    for pid in children:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if any(arg.endswith(f"/node-{node}".encode()) for arg in argv):
            return int(pid)
    raise AssertionError(f"no launcher of node {node} among {children}")


def test_simulate_replace_lost_plays_the_kubelet(tmp_path: Path) -> None:
    """``simulate --replace-lost 1``: node 1's launcher, SIGKILLed in attempt 0, is started
    again a second later, rejoins, and the job succeeds with attempt 1 on every node."""
    out = tmp_path / "out"
    out.mkdir()
    argv = [
        str(Path(sys.executable).with_name("malaunch")), "simulate", "--nodes", "2",
        "--nproc-per-node", "2", "--platform", "volcano", "--framework", "torch_ddp",
        "--log-dir", str(tmp_path / "logs"), "--console-ranks", "none", "--max-restarts", "1",
        "--replace-lost", "1", "--", sys.executable, str(WORKER), str(out), "--steps", "40",
    ]  # fmt: skip
    with open(tmp_path / "simulate.out", "wb") as log:
        proc = subprocess.Popen(argv, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while len(started(tmp_path, 0)) < 4:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        os.kill(launcher_of(proc.pid, 1), signal.SIGKILL)
        code = proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = (tmp_path / "simulate.out").read_text()
    assert code == 0, output
    assert "node 1 (pid " in output and "was killed by SIGKILL: starting it again in 1s" in output
    assert started(tmp_path, 1) == [f"worker-{rank}-1" for rank in range(4)]
    assert wait_gone(recorded_pids(out)) == []
