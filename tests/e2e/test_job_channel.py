"""The job across nodes (SPEC §9), with node launchers started independently.

Each test asks ``malaunch simulate --print-env`` for every node's environment and complete
launcher command, then starts those commands one by one with no simulate parent, exactly as
a cluster would, over real sockets on loopback. The workers are ``tests/workers/
job_worker.py``; every pid they record is checked to be gone at the end.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

import pytest
from launchers import Launchers, NodeCommand, node_dir, option, printed_nodes, recorded_pids

from malaunch.testing import wait_gone

WORKER = Path(__file__).parents[1] / "workers" / "job_worker.py"


def nodes_of(
    tmp_path: Path,
    nodes: int,
    worker: Sequence[str] = (),
    launcher: Sequence[str] = (),
    platform: Sequence[str] = ("--platform", "volcano", "--framework", "torch_ddp"),
) -> List[NodeCommand]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    args = [
        "--nodes", str(nodes), "--nproc-per-node", "2", *platform,
        "--log-dir", str(tmp_path / "logs"), "--platform-dir", str(tmp_path / "platform"),
        "--console-ranks", "none", *launcher,
        "--", sys.executable, str(WORKER), str(out), *worker,
    ]  # fmt: skip
    return printed_nodes(args, cwd=tmp_path)


def summary(tmp_path: Path, node: int) -> Dict[str, Any]:
    path = node_dir(tmp_path / "logs", node) / "malaunch-summary.json"
    loaded: Dict[str, Any] = json.loads(path.read_text())
    return loaded


def assert_nothing_left(tmp_path: Path) -> None:
    pids = recorded_pids(tmp_path / "out")
    assert pids
    assert wait_gone(pids) == []


def wait_for_pids(tmp_path: Path, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while len(recorded_pids(tmp_path / "out")) < count:
        assert time.monotonic() < deadline, f"fewer than {count} workers started"
        time.sleep(0.02)


@pytest.mark.parametrize("count", [2, 3])
def test_a_failure_on_one_node_stops_every_node(tmp_path: Path, count: int) -> None:
    """(a) rank 3, on node 1, exits 7 while every other rank sleeps."""
    nodes = nodes_of(tmp_path, count, worker=["--fail", "3:7"])
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        codes = launchers.wait(timeout=60)
        output = launchers.output()
    # The other ranks sleep 120 s and the wait above gives up at 60: their 75 is the stop
    # (how soon it comes is measured in benchmarks/bench_job.py).
    assert codes == {index: 7 if index == 1 else 75 for index in range(count)}, output
    for index in range(count):
        report = summary(tmp_path, index)
        assert report["exit_code"] == codes[index]
        failure = report["job_failure"]
        assert (failure["node"], failure["rank"], failure["code"]) == (1, 3, 7)
        if index != 1:
            assert report["stopped_by"] == failure
    assert_nothing_left(tmp_path)


@pytest.mark.parametrize("platform", ["modelarts", "octopus"])
def test_print_env_commands_of_platforms_with_files_run_as_printed(
    tmp_path: Path, platform: str
) -> None:
    """With --platform-dir, what --print-env prints for ModelArts (a rank table) and Octopus
    (data directories) runs as it is: every rank of both nodes succeeds, no warning of a
    missing path, nothing left."""
    args = ("--platform", platform, "--framework", "torch_ddp")
    nodes = nodes_of(tmp_path, 2, worker=["--steps", "2"], platform=args)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        codes = launchers.wait(timeout=60)
        output = launchers.output()
    assert codes == {0: 0, 1: 0}, output
    assert sorted(p.name for p in (tmp_path / "out").glob("ok-*")) == [
        f"ok-{rank}-0" for rank in range(4)
    ]
    assert "does not exist" not in output
    assert "warning" not in output
    assert_nothing_left(tmp_path)


@pytest.mark.parametrize("platform", ["pytorchjob", "ascendjob"])
def test_a_on_platforms_whose_pods_know_only_the_master(tmp_path: Path, platform: str) -> None:
    """(a) on Kubeflow (a master address of no known form) and MindX PyTorch pods: each pod
    knows only the master's address and names the other nodes with placeholders that differ
    from pod to pod. The channel dials the master, and the token ignores the placeholders."""
    nodes = nodes_of(
        tmp_path,
        2,
        worker=["--fail", "3:7"],
        platform=("--platform", platform, "--framework", "torch_ddp"),
    )
    assert "MASTER_ADDR" in nodes[1].env and "--master-port" not in nodes[1].argv
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        codes = launchers.wait(timeout=60)
        output = launchers.output()
    assert codes == {0: 75, 1: 7}, output  # the others sleep 120 s: 75 is the stop
    failure = summary(tmp_path, 0)["stopped_by"]
    assert (failure["node"], failure["rank"], failure["code"]) == (1, 3, 7)
    assert_nothing_left(tmp_path)


def test_c_parameter_server_nodes_finish_with_the_job(tmp_path: Path) -> None:
    """(c) TF PS with the ps task on a node of its own: every launcher exits 0."""
    platform = ("--platform", "tf-ps", "--num-ps", "1", "--framework", "tensorflow_ps")
    nodes = nodes_of(tmp_path, 2, worker=["--steps", "3"], platform=platform)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        codes = launchers.wait(timeout=60)
        output = launchers.output()
    # The ps serves forever: its launcher's 0 within the wait is the stop after the workers'
    # success, and SIGTERM the way it was stopped.
    assert codes == {0: 0, 1: 0, 2: 0}, output
    ps = summary(tmp_path, 0)
    assert [(p["role"], p["service"], p["signal"]) for p in ps["processes"]] == [
        ("ps", True, "SIGTERM")
    ]
    assert_nothing_left(tmp_path)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_d_a_vanished_node_0_stops_the_others(tmp_path: Path, how: str) -> None:
    """(d) SIGKILL closes node 0's connections at once; SIGSTOP (a frozen machine) is found
    by the heartbeat timeout."""
    timeout = 2.0
    launcher = ["--heartbeat-timeout", str(timeout)]
    nodes = nodes_of(tmp_path, 3, worker=["--steps", "1000"], launcher=launcher)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for_pids(tmp_path, 6)
        launchers.procs[0].send_signal(getattr(signal, how))
        # The ranks run 1,000 steps of 0.1 s: a 75 within this wait is the loss being found.
        codes = launchers.wait(timeout=30, only=[1, 2])
        assert codes == {1: 75, 2: 75}, launchers.output()
        for index in (1, 2):
            failure = summary(tmp_path, index)["stopped_by"]
            assert (failure["kind"], failure["node"]) == ("lost", 0)
            # found by the closed connection, or (a frozen node 0) by the heartbeat timeout
            found = "closed the connection" if how == "SIGKILL" else "no heartbeat from node 0 for"
            assert found in failure["reason"], failure
        launchers.procs[0].kill()  # a frozen launcher, too; its ranks die with it
        launchers.procs[0].wait(timeout=10)
    assert_nothing_left(tmp_path)  # node 0's ranks died with it (PDEATHSIG, reaper)


def test_d_a_vanished_node_1_stops_the_others(tmp_path: Path) -> None:
    nodes = nodes_of(tmp_path, 3, worker=["--steps", "1000"])
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for_pids(tmp_path, 6)
        launchers.procs[1].kill()
        codes = launchers.wait(timeout=30, only=[0, 2])
        assert codes == {0: 75, 2: 75}, launchers.output()
    failure = summary(tmp_path, 0)["stopped_by"]
    assert (failure["kind"], failure["node"]) == ("lost", 1)
    assert_nothing_left(tmp_path)


def test_e_a_failure_in_attempt_0_restarts_the_whole_job(tmp_path: Path) -> None:
    """(e) rank 3 fails in attempt 0 only: every node restarts, and the job succeeds."""
    # Rank 3 fails once every rank has started (ranks slow to import may not have yet).
    worker = ["--fail", "3:7", "--fail-attempt", "0", "--fail-when-all-started", "--steps", "3"]
    launcher = ["--max-restarts", "1", "--restart-backoff", "0"]
    nodes = nodes_of(tmp_path, 2, worker=worker, launcher=launcher)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        codes = launchers.wait(timeout=60)
        assert codes == {0: 0, 1: 0}, launchers.output()
    out = tmp_path / "out"
    # Every rank ran in both attempts; only attempt 1 succeeded.
    assert sorted(p.stem for p in out.glob("worker-*.pid")) == [
        f"worker-{rank}-{attempt}" for rank in range(4) for attempt in (0, 1)
    ]
    assert sorted(p.name for p in out.glob("ok-*")) == [f"ok-{rank}-1" for rank in range(4)]
    # Node 0 hosts the rendezvous, so attempt 1 got a fresh master port, on both nodes alike:
    # a straggler of attempt 0 can never meet attempt 1.
    ports = {
        attempt: {(out / f"port-{rank}-{attempt}").read_text() for rank in range(4)}
        for attempt in (0, 1)
    }
    assert ports[0] == {option(nodes[0].argv, "--master-port")}, ports
    assert len(ports[1]) == 1 and ports[1] != ports[0], ports
    assert int(next(iter(ports[1]))) > 0
    for index in (0, 1):
        report = summary(tmp_path, index)
        assert (report["exit_code"], report["restarts"]) == (0, 1)
        first, second = report["attempts"]
        assert (first["failure"]["node"], first["failure"]["rank"]) == (1, 3)
        assert (first["failure"]["code"], first["decision"]) == (7, "restart 1 of 1")
        assert first["delay"] == 0.0  # --restart-backoff 0, recorded on every node
        assert (second["failure"], second["decision"]) == (
            None,
            "every worker of the job succeeded",
        )
    assert_nothing_left(tmp_path)


def _stranger(port: int, payload: bytes, answer_challenge: bool = False) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if answer_challenge:
        sock.recv(4096)
    sock.sendall(payload)
    return sock


def test_f_strangers_on_the_job_port_change_nothing(tmp_path: Path) -> None:
    """(f) garbage, a wrong token, an oversized line, an impostor node, a silent socket."""
    nodes = nodes_of(tmp_path, 2, worker=["--steps", "25"])
    port = int(option(nodes[0].argv, "--job-port"))
    opened: List[socket.socket] = []
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for_pids(tmp_path, 4)
        wrong = json.dumps({"t": "hello", "node": 1, "proof": "0" * 64}).encode() + b"\n"
        impostor = json.dumps({"t": "hello", "node": 5, "proof": "x"}).encode() + b"\n"
        for payload, answer in (
            (b"GET / HTTP/1.0\r\n\r\n", False),
            (wrong, True),
            (impostor, True),
            (b"x" * 200_000, True),
            (b"", False),
        ):
            opened.append(_stranger(port, payload, answer))
        codes = launchers.wait(timeout=60)
        output = launchers.output()
    for sock in opened:
        sock.close()
    assert codes == {0: 0, 1: 0}, output
    assert "rejected a connection" in launchers.output(0)
    assert "wrong token" in output
    assert "lost node" not in output
    assert sorted(p.name for p in (tmp_path / "out").glob("ok-*")) == [
        f"ok-{rank}-0" for rank in range(4)
    ]
    assert_nothing_left(tmp_path)


@pytest.mark.parametrize("stacks", ["auto", "faulthandler"])
def test_b_a_hung_rank_is_named_with_every_ranks_stack(tmp_path: Path, stacks: str) -> None:
    """(b) without frameworks: rank 1 loops silently in stall_here; the others wait for it in
    wait_for_peer. (The real torch gloo job is in test_frameworks_torch.py.)"""
    launcher = ["--hang-timeout", "2", "--hang-startup-timeout", "60", "--hang-stacks", stacks]
    nodes = nodes_of(tmp_path, 2, worker=["--stall", "1", "--steps", "100"], launcher=launcher)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        codes = launchers.wait(timeout=60)
        output = launchers.output()
    assert codes == {0: 124, 1: 75}, output
    hang = summary(tmp_path, 0)["hang"]
    assert (hang["node"], hang["rank"], hang["culprits"]) == (0, 1, [1])
    assert hang["seconds_silent"] >= 2.0
    assert summary(tmp_path, 1)["hang"]["culprits"] == [1]
    logs = tmp_path / "logs"
    files = {r: node_dir(logs, r // 2) / "stacks" / "attempt-0" / f"rank-{r}.txt" for r in range(4)}
    assert hang["stack_file"] == str(files[1])
    assert "stall_here" in files[1].read_text()
    for rank in (0, 2, 3):
        assert "wait_for_peer" in files[rank].read_text()
    assert_nothing_left(tmp_path)


def test_node_0_says_whom_it_waits_for_then_exits_69(tmp_path: Path) -> None:
    """Node 0 alone: a line at 2 s and every 10 s naming the node launchers that have not
    joined and the port, then one error line and exit 69 at --wait-timeout."""
    nodes = nodes_of(tmp_path, 3, launcher=["--wait-timeout", "13"])
    port = option(nodes[0].argv, "--job-port")
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(0)
        assert launchers.wait(timeout=60) == {0: 69}
    waiting = [line for line in launchers.output(0).splitlines() if "waiting for" in line]
    assert waiting == [
        f"malaunch: info: waiting for node launchers to join the job channel on port {port}: "
        f"{seconds}s of 13 (not yet: node 1, 2)"
        for seconds in (2, 12)
    ], launchers.output(0)
    assert launchers.output(0).splitlines()[-1] == (
        "malaunch: error: node launchers [1, 2] never joined the job channel within "
        "--wait-timeout (is malaunch started on every node, with the same --job-port?)"
    )


class FakeNode0:
    """A program that took the job port before node 0's launcher: it challenges like node 0,
    then welcomes whoever answers, without proving the token, and orders a stop."""

    def __init__(self, port: int, welcome: Dict[str, Any]) -> None:
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.2)
        self.welcome = welcome
        self.hellos: List[Dict[str, Any]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.is_set():
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(5)
                conn.sendall(b'{"t":"challenge","nonce":"' + b"ab" * 16 + b'","version":2}\n')
                hello = conn.makefile("rb").readline()
                if hello:
                    self.hellos.append(json.loads(hello))
                stop = {"t": "stop", "final": True, "failure": {"kind": "exit", "node": 1}}
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps(self.welcome).encode() + b"\n")
                    conn.sendall(json.dumps(stop).encode() + b"\n")

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)
        self.listener.close()


@pytest.mark.parametrize(
    "welcome",
    [{"t": "welcome"}, {"t": "welcome", "proof": "0" * 64}],
    ids=["no-proof", "wrong-proof"],
)
def test_an_impostor_on_the_job_port_is_refused(tmp_path: Path, welcome: Dict[str, Any]) -> None:
    """Authentication is mutual: node 1 trusts nothing from a server on the job port that does
    not prove the token; it keeps trying until --wait-timeout, then exits 69 naming it."""
    nodes = nodes_of(tmp_path, 2, worker=["--steps", "3"], launcher=["--wait-timeout", "3"])
    port = int(option(nodes[1].argv, "--job-port"))
    fake = FakeNode0(port, welcome)
    try:
        with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
            launchers.start(1)
            codes = launchers.wait(timeout=30)
    finally:
        fake.close()
    output = launchers.output(1)
    assert codes == {1: 69}, output
    assert output.splitlines()[-1] == (
        f"malaunch: error: the server at 127.0.0.1:{port} (job channel, --job-port) failed "
        "authentication: its welcome does not prove this job's token (another program holds "
        "the job port, or it serves another job); gave up after --wait-timeout 3s"
    )
    assert len(fake.hellos) >= 2  # it kept trying
    assert all(h["t"] == "hello" and h["node"] == 1 and len(h["nonce"]) == 32 for h in fake.hellos)
    assert recorded_pids(tmp_path / "out") == []  # no rank started on the impostor's word


def test_a_connection_flood_costs_a_few_log_lines_and_the_job_succeeds(tmp_path: Path) -> None:
    """Silent connections, held open, while the job runs: 200 that time out unanswered, then
    hundreds more than the 256 node 0 lets wait for a handshake, which close the oldest to
    make room for the next. Its log gets one "too many" line per 10 s with a count, and a few
    named rejections with a count of the others, not a line each."""
    nodes = nodes_of(tmp_path, 2, worker=["--steps", "90"])
    port = int(option(nodes[0].argv, "--job-port"))
    opened: List[socket.socket] = []
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        wait_for_pids(tmp_path, 4)
        for held, seconds in ((200, 4.0), (800, 3.0)):  # past the 3 s handshake timeout, then
            deadline = time.monotonic() + seconds  # more than the waiting room holds
            while time.monotonic() < deadline:
                if len(opened) < held:
                    with contextlib.suppress(OSError):
                        opened.append(socket.create_connection(("127.0.0.1", port), timeout=2))
                time.sleep(0.002)
        attempts = len(opened)
        for sock in opened:
            sock.close()
        codes = launchers.wait(timeout=60)
        output = launchers.output()
    assert codes == {0: 0, 1: 0}, output
    assert attempts >= 500
    lines = [line for line in launchers.output(0).splitlines() if "job channel:" in line]
    too_many = [line for line in lines if "too many unauthenticated" in line]
    rejected = [line for line in lines if "rejected" in line]
    assert sorted(lines) == sorted(too_many + rejected), lines
    first = re.fullmatch(
        r"malaunch: warning: job channel: too many unauthenticated connections \(256 waiting\): "
        r"closed 127\.0\.0\.1:\d+, silent for (\d+\.\d)s",
        too_many[0],
    )
    assert first is not None, too_many[0]
    assert float(first.group(1)) >= 0.2  # it had its chance (MIN_CHANCE 0.25 s) to answer
    counted = [int(line.split(" closed ")[1].split()[0]) for line in too_many[1:]]
    assert 1 <= len(counted) <= 2 and sum(counted) >= 100, lines
    assert all(" more of the oldest in " in line for line in too_many[1:]), lines
    # The strangers that waited 3 s unanswered: five named, then counts.
    assert 5 <= len(rejected) <= 7, lines
    assert rejected[0].endswith(": no handshake within 3s")
    assert "more connections in" in rejected[5], lines
    assert "lost node" not in output
    assert_nothing_left(tmp_path)


def test_a_node_that_cannot_reach_node_0_says_why_it_may_be(tmp_path: Path) -> None:
    """Node 1 alone: exit 69 at --wait-timeout, one error line naming the address and port,
    the likely causes and the way to run without the channel."""
    nodes = nodes_of(tmp_path, 2, launcher=["--wait-timeout", "3"])
    port = option(nodes[0].argv, "--job-port")
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(1)
        assert launchers.wait(timeout=60) == {1: 69}
    last = launchers.output(1).splitlines()[-1]
    assert last.startswith(f"malaunch: error: node 0's launcher at 127.0.0.1:{port} (job ")
    assert last.endswith(
        f"(is malaunch running on node 0, and does every Service or firewall between the nodes "
        f"pass port {port}? --no-job-channel runs without the channel)"
    ), last


def test_a_node_stopped_during_a_restarts_back_off_stops_the_job(tmp_path: Path) -> None:
    """Rank 3 fails in attempt 0, the job waits 8 s to restart, and node 1's launcher gets
    SIGTERM meanwhile: without replacement (--rejoin-timeout 0), node 1 exits 143 and node 0
    75, with no attempt 1 started without node 1 (its report used to carry attempt -1, which
    node 0 ignored). With replacement, node 0 would wait for node 1's (test_job_replacement)."""
    worker = ["--fail", "3:7", "--fail-attempt", "0", "--steps", "3"]
    launcher = ["--max-restarts", "1", "--restart-backoff", "8", "--rejoin-timeout", "0"]
    nodes = nodes_of(tmp_path, 2, worker=worker, launcher=launcher)
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start_all()
        deadline = time.monotonic() + 60
        while "restart 1 of 1 after a" not in launchers.output(0):
            assert time.monotonic() < deadline, launchers.output()
            time.sleep(0.05)
        launchers.procs[1].send_signal(signal.SIGTERM)
        codes = launchers.wait(timeout=30)
    assert codes == {0: 75, 1: 143}, launchers.output()
    assert not list((tmp_path / "out").glob("worker-*-1.pid"))  # no attempt 1 anywhere
    failure = summary(tmp_path, 0)["stopped_by"]
    assert (failure["kind"], failure["node"]) == ("signal", 1)
    assert_nothing_left(tmp_path)
