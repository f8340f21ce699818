"""Data staging in a multi-node job (SPEC §9, §10), through the installed command against a
real S3 API server on loopback (moto, ``s3server.py``).

Every node joins the job channel first and stages in afterwards, its event loop running: a
stage-in that fails on one node stops the others at once (75) instead of leaving them at the
join until ``--wait-timeout``; a stage-in longer than ``--wait-timeout`` (or than
``--heartbeat-timeout``) is no absence. In a TensorFlow PS job, ``{rank}`` outputs come from
the workers (a ps task has no rank) and a shared output from the node of rank 0, which is not
node 0 there. A LOCAL that was never written is said.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from launchers import Launchers, node_dir, printed_nodes
from s3server import S3Server, running_server

from malaunch.testing import clean_env, malaunch_executable, run_cli, run_dir

STAGING_RANK = Path(__file__).resolve().parents[1] / "workers" / "staging_rank.py"
TF_TASK = Path(__file__).resolve().parents[1] / "workers" / "tf_stage_task.py"
ERROR = "malaunch: error: "


@pytest.fixture
def s3() -> Iterator[S3Server]:
    yield from running_server()


@pytest.fixture
def inputs(s3: S3Server) -> Dict[str, str]:
    """Bucket ``data`` with three files under ``set0/`` (none under ``set1/``), an empty bucket
    ``results``; the sha256 of each file is what staging_rank.py checks (here: any)."""
    client = s3.client()
    client.create_bucket(Bucket="data")
    client.create_bucket(Bucket="results")
    for name in ("a.bin", "b.bin", "deep/c.bin"):
        client.put_object(Bucket="data", Key=f"set0/{name}", Body=os.urandom(1000))
    return {"a.bin": "", "b.bin": "", "deep/c.bin": ""}


def uploaded(s3: S3Server, prefix: str) -> Dict[str, bytes]:
    client = s3.client()
    listing = client.list_objects_v2(Bucket="results", Prefix=prefix).get("Contents", [])
    return {
        item["Key"]: client.get_object(Bucket="results", Key=item["Key"])["Body"].read()
        for item in listing
    }


def summary(tmp_path: Path, node: int) -> Dict[str, Any]:
    path = node_dir(tmp_path / "logs", node) / "malaunch-summary.json"
    loaded: Dict[str, Any] = json.loads(path.read_text())
    return loaded


def volcano_nodes(tmp_path: Path, *options: str) -> List[Any]:
    args = [
        "--nodes", "2", "--platform", "volcano", "--framework", "torch_ddp",
        "--nproc-per-node", "1", "--log-dir", str(tmp_path / "logs"),
        "--platform-dir", str(tmp_path / "platform"), "--grace-period", "3", *options,
        "--", sys.executable, "-S", str(STAGING_RANK),
    ]  # fmt: skip
    return printed_nodes(args, cwd=tmp_path)


def test_a_stage_in_failing_on_node_1_stops_node_0_at_once(
    s3: S3Server, inputs: Dict[str, str], tmp_path: Path
) -> None:
    """Node 1's prefix does not exist: node 1 exits 66 with its one error line, node 0 (at the
    default --wait-timeout of 600 s) exits 75 within seconds, naming node 1 and 66; no rank
    started anywhere."""
    nodes = volcano_nodes(tmp_path, "--stage-in", "data/{node}=s3://data/set{node}")
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(0, s3.env())
        launchers.start(1, s3.env())
        codes = launchers.wait(timeout=60)
    # 75 is the stop: node 0, left waiting, would give up at --wait-timeout (600 s) with 69.
    assert codes == {0: 75, 1: 66}, launchers.output()
    last = launchers.output(1).splitlines()[-1]
    assert last == f"{ERROR}s3://data/set1: no such bucket, object or prefix", launchers.output()
    assert (
        "malaunch: warning: node 1's stage-in failed with exit code 66: stopping"
        in launchers.output(0).splitlines()
    ), launchers.output(0)
    stopped_by = summary(tmp_path, 0)["stopped_by"]
    assert (stopped_by["kind"], stopped_by["node"], stopped_by["code"]) == ("stage-in", 1, 66)
    assert "s3://data/set1" in stopped_by["reason"]
    assert summary(tmp_path, 0)["exit_code"] == 75
    assert not list((tmp_path / "logs").rglob("worker-*.log"))  # nothing started
    # Node 0's own stage-in finished or was cut short by the stop (a race either way): no
    # half-written file is left.
    assert not list((tmp_path / "data").rglob("*.malaunch-partial"))


def test_node_0_failing_before_node_1_joins_still_stops_node_1(
    s3: S3Server, inputs: Dict[str, str], tmp_path: Path
) -> None:
    """Node 0 has no credentials (66) and node 1 comes 3 s later: the stage-in starts only once
    every node has joined, so node 1 hears the stop (75) instead of dialling a node 0 that
    is gone until --wait-timeout (69)."""
    nodes = volcano_nodes(tmp_path, "--stage-in", "data=s3://data/set0")
    with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
        launchers.start(0)  # no endpoint, no credentials
        time.sleep(3)
        launchers.start(1, s3.env())
        codes = launchers.wait(timeout=60)
    # 75 is the stop; a node 1 dialling a node 0 that is gone would end with 69.
    assert codes == {0: 66, 1: 75}, launchers.output()
    stopped_by = summary(tmp_path, 1)["stopped_by"]
    assert (stopped_by["kind"], stopped_by["node"], stopped_by["code"]) == ("stage-in", 0, 66)


def silent_server() -> socket.socket:
    """A port that accepts connections (the kernel's backlog) and never answers a request."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    return listener


@pytest.mark.parametrize("signals", [1, 2])
def test_sigterm_during_a_stage_in_stuck_in_a_request(tmp_path: Path, signals: int) -> None:
    """The server never answers: a SIGTERM ends the launcher (143) once the 10 s a cancelled
    stage-in is given are over (not at botocore's read timeout of 60 s: the wait below gives up
    at 30), and a second SIGTERM ends it at once, before those 10 s."""
    listener = silent_server()
    env = clean_env({
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{listener.getsockname()[1]}",
        "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
    })  # fmt: skip
    args = [
        malaunch_executable(), "--framework", "torch_ddp", "--topology", "local",
        "--log-dir", str(tmp_path / "logs"), "--stage-in", "data=s3://data/set0",
        "--", sys.executable, "-c", "pass",
    ]  # fmt: skip
    with listener:
        proc = subprocess.Popen(args, env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        held = None
        try:
            # In its request once connected (not after a fixed sleep: on a loaded machine the
            # launcher may take longer to get there, and a signal before its handlers kills it)
            listener.settimeout(60)
            held, _ = listener.accept()  # kept open, never answered
            time.sleep(0.5)
            for _ in range(signals):
                proc.send_signal(signal.SIGTERM)
                time.sleep(0.5)
            code = proc.wait(timeout=30)
        finally:
            if held is not None:
                held.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            stderr = proc.stderr.read() if proc.stderr else ""
            if proc.stderr:
                proc.stderr.close()
    assert code == 143, stderr
    # Which of the two ended it, as the launcher says it (not a bound on this machine's speed)
    why = "a second signal" if signals == 2 else "not in time"
    assert f"stage-in stopped ({why}): files in flight are left unfinished" in stderr, stderr


@pytest.mark.parametrize("slow", [0, 1])
def test_a_stage_in_longer_than_the_wait_and_heartbeat_timeouts(
    s3: S3Server, inputs: Dict[str, str], tmp_path: Path, slow: int
) -> None:
    """Node ``slow``'s server opens only 3.5 s after that node's first failed try (retries wait
    1, 2, 4, 8 s): its stage-in lasts past --wait-timeout 3 and --heartbeat-timeout 2, and the
    job runs all the same: the wait covers the joining only, and the heartbeats go on.

    The server opens on the node's own first retry line, not at a fixed time from the start:
    on a loaded machine the launchers may take seconds to get there."""
    late = S3Server()  # the same buckets: moto keeps them per process
    nodes = volcano_nodes(
        tmp_path,
        "--stage-in", "data=s3://data/set0",
        "--wait-timeout", "3", "--heartbeat-timeout", "2",
    )  # fmt: skip
    expected = {"EXPECTED": json.dumps(tree(s3))}
    try:
        with Launchers(nodes, tmp_path, tmp_path / "launchers") as launchers:
            for node in (0, 1):
                server = late if node == slow else s3
                launchers.start(node, {**server.env(), **expected})
            wait_for_line(launchers, slow, "retrying in 1.0s")
            time.sleep(3.5)  # the stage-in's length, which outlasts both timeouts
            late.start()
            codes = launchers.wait(timeout=60)
    finally:
        late.close()
    assert codes == {0: 0, 1: 0}, launchers.output()
    if slow == 1:  # node 0, ready long before, says whom the job waits for
        assert (
            "malaunch: info: waiting for the other nodes to stage in: 2s (not ready yet: node 1)"
            in launchers.output(0).splitlines()
        ), launchers.output(0)
    stage_in = summary(tmp_path, slow)["staging"]["stage_in"]
    # Every input is there once the server was (the nodes share a folder here: the other node
    # may have brought them first, and then they are up to date).
    (mapping,) = stage_in["mappings"]
    assert mapping["files"] + mapping["skipped"] == 3, stage_in
    # What the test set up, read back: the stage-in began before the first retry line and
    # ended after the server opened, 3.5 s later (more than either timeout).
    took = seconds(stage_in["end_time"]) - seconds(stage_in["start_time"])
    assert took >= 3.5, stage_in


def wait_for_line(launchers: Launchers, node: int, text: str) -> None:
    """Until node ``node``'s launcher has printed a line holding ``text`` (60 s at most)."""
    deadline = time.monotonic() + 60
    while text not in launchers.output(node):
        assert launchers.procs[node].poll() is None, launchers.output()
        assert time.monotonic() < deadline, launchers.output()
        time.sleep(0.05)


def tree(s3: S3Server) -> Dict[str, str]:
    """What staging_rank.py expects in ``data``: name -> sha256 of ``set0/``."""
    client = s3.client()
    listing = client.list_objects_v2(Bucket="data", Prefix="set0/")["Contents"]
    return {
        item["Key"][len("set0/") :]: hashlib.sha256(
            client.get_object(Bucket="data", Key=item["Key"])["Body"].read()
        ).hexdigest()
        for item in listing
    }


def seconds(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso).timestamp()


def tf_ps(tmp_path: Path, *options: str) -> List[str]:
    """1 ps + 2 workers, each task a node: node 0 = ps 0, nodes 1 and 2 = ranks 0 and 1."""
    return [
        "simulate", "--nodes", "2", "--num-ps", "1", "--platform", "tf-ps",
        "--framework", "tensorflow_ps", "--log-dir", str(tmp_path / "logs"),
        "--grace-period", "3", *options, "--", sys.executable, "-S", str(TF_TASK),
    ]  # fmt: skip


def test_tf_ps_rank_outputs_are_uploaded_by_the_workers_and_skipped_on_the_ps(
    s3: S3Server, inputs: Dict[str, str], tmp_path: Path
) -> None:
    args = tf_ps(tmp_path, "--stage-out", "results/{rank}=s3://results/models/{rank}")
    result = run_cli(args, env=clean_env(s3.env()), cwd=tmp_path, timeout=120)
    assert result.code == 0, result.stderr
    assert uploaded(s3, "models/") == {
        f"models/{rank}/model.txt": f"model of rank {rank}\n".encode() for rank in (0, 1)
    }
    node_0 = run_dir(tmp_path / "logs") / "node-0.log"
    assert "{rank} names no process of this node" in node_0.read_text()
    outputs = [summary(tmp_path, node)["staging"].get("stage_out") for node in (0, 1, 2)]
    assert outputs[0] is None  # the ps node: nothing to upload
    assert [m["local"] for m in outputs[1]["mappings"]] == ["results/0"]
    assert [m["local"] for m in outputs[2]["mappings"]] == ["results/1"]


def test_tf_ps_shared_output_is_uploaded_by_the_node_of_rank_0(
    s3: S3Server, inputs: Dict[str, str], tmp_path: Path
) -> None:
    args = tf_ps(tmp_path, "--stage-out", "shared=s3://results/shared")
    result = run_cli(args, env=clean_env(s3.env()), cwd=tmp_path, timeout=120)
    assert result.code == 0, result.stderr
    # The nodes share the launch directory here, so worker 1's file is there too.
    assert uploaded(s3, "shared/") == {
        f"shared/worker-{rank}.txt": f"written by rank {rank}\n".encode() for rank in (0, 1)
    }
    outputs = [summary(tmp_path, node)["staging"].get("stage_out") for node in (0, 1, 2)]
    assert outputs[0] is None and outputs[2] is None  # ps 0 and worker 1 upload nothing
    assert [(m["local"], m["files"]) for m in outputs[1]["mappings"]] == [("shared", 2)]


def test_a_local_that_was_never_written_is_a_warning_and_listed_as_missing(
    s3: S3Server, inputs: Dict[str, str], tmp_path: Path
) -> None:
    args = [
        "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "1",
        "--log-dir", str(tmp_path / "logs"), "--stage-out", "nolocal=s3://results/nl",
        "--", sys.executable, "-c", "pass",
    ]  # fmt: skip
    result = run_cli(args, env=clean_env(s3.env()), cwd=tmp_path, timeout=60)
    assert result.code == 0, result.stderr
    warning = "malaunch: warning: stage-out: nolocal does not exist: nothing uploaded from it"
    assert warning in result.stderr.splitlines(), result.stderr
    record = json.loads((run_dir(tmp_path / "logs") / "malaunch-summary.json").read_text())
    assert record["staging"]["stage_out"]["missing"] == ["nolocal"]
    assert record["staging"]["stage_out"]["errors"] == []
    assert uploaded(s3, "nl") == {}
