"""The job channel with 500 nodes: one real node-0 launcher and 499 node clients that speak the
real protocol over real sockets, each from a loopback address of its own (tests/e2e/swarm.py,
tests/workers/node_swarm.py). Behaviour only; the times are benchmarks/bench_channel.py's.

"Node 0 keeps going while 50 nodes vanish at once" means two things, by the restart budget:
with ``--max-restarts 0`` a lost node ends the job, so node 0 must end it well: every one of the
449 others is told to stop, and node 0's summary names the first node lost; with a restart
left, node 0 waits for the 50 replacements and the job goes on: all 499 start attempt 1.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import pytest
from swarm import SwarmJob

from malaunch.testing import clean_env, malaunch_executable, run_dir

NODES = 500
RANK = [sys.executable, "-S", "-c", "import time; time.sleep(600)"]
OPTIONS = ["--grace-period", "2", "--wait-timeout", "120"]


@pytest.fixture
def job(tmp_path: Path) -> Iterator[SwarmJob]:
    with SwarmJob(tmp_path, NODES, swarms=2) as started:
        yield started


def start(job: SwarmJob, options: List[str], answer_after: float = 0.0) -> None:
    """Node 0, then every other node at once; returns once all have heard attempt 0 start."""
    job.start_node_0([*OPTIONS, *options], RANK)
    job.wait_listening()
    job.start_swarms(answer_after)
    job.tell("go")
    assert sum(e["count"] for e in job.wait("joined", 120)) == NODES - 1
    assert sum(e["count"] for e in job.wait("started", 120, attempt=0)) == NODES - 1
    assert job.status()["states"] == {"joined": NODES - 1}


def summary(job: SwarmJob) -> dict:  # type: ignore[type-arg]
    loaded: dict = json.loads((run_dir(job.log_dir) / "malaunch-summary.json").read_text())  # type: ignore[type-arg]
    return loaded


def test_every_node_joins_and_every_node_hears_the_stop_after_a_failure(job: SwarmJob) -> None:
    start(job, [])
    job.tell("fail 321")
    stopped = job.wait("stopped", 60, attempt=0)
    assert sum(e["count"] for e in stopped) == NODES - 1, (stopped, job.status(), job.backlog)
    assert all(e["final"] for e in stopped)
    assert job.node0 is not None and job.node0.wait(timeout=60) == 75, job.output()
    assert summary(job)["stopped_by"] == {
        "kind": "exit", "rank": 321, "role": "worker", "code": 3, "node": 321,
    }  # fmt: skip
    assert summary(job)["nodes"] == NODES


def test_fifty_vanished_nodes_end_the_job_for_all_others_without_restarts(job: SwarmJob) -> None:
    start(job, ["--max-restarts", "0"])
    job.tell("vanish 100 50")
    stopped = job.wait("stopped", 60, attempt=0)
    assert sum(e["count"] for e in stopped) == NODES - 1 - 50, (stopped, job.status(), job.backlog)
    assert all(e["final"] for e in stopped)
    assert job.node0 is not None and job.node0.wait(timeout=60) == 75, job.output()
    stopped_by = summary(job)["stopped_by"]
    assert stopped_by["kind"] == "lost"
    assert 100 <= stopped_by["node"] < 150  # the first of them node 0 noticed
    lost = [line for line in job.output().splitlines() if "lost node" in line]
    assert 1 <= len(lost) <= 50, lost


def test_fifty_vanished_nodes_are_replaced_and_the_job_goes_on(job: SwarmJob) -> None:
    start(job, ["--max-restarts", "1", "--rejoin-timeout", "60"])
    job.tell("vanish 100 50")
    waiting = job.wait("stopped", 60, attempt=0)
    assert sum(e["count"] for e in waiting) == NODES - 1 - 50
    assert not any(e["final"] for e in waiting)  # they wait for replacements
    job.tell("replace 100 50")
    started = job.wait("started", 120, attempt=1)
    assert sum(e["count"] for e in started) == NODES - 1
    job.tell("fail 499")
    stopped = job.wait("stopped", 60, attempt=1)
    assert sum(e["count"] for e in stopped) == NODES - 1
    assert all(e["final"] for e in stopped)
    assert job.node0 is not None and job.node0.wait(timeout=60) == 75, job.output()
    attempts = summary(job)["attempts"]
    assert [a["attempt"] for a in attempts] == [0, 1]
    assert sorted(loss["node"] for loss in attempts[0]["losses"]) == list(range(100, 150))
    assert all(loss["rejoin_seconds"] is not None for loss in attempts[0]["losses"])
    assert attempts[1]["failure"]["node"] == 499


def test_a_burst_of_slow_nodes_is_not_taken_for_a_flood(job: SwarmJob) -> None:
    """499 nodes connect at once and each answers the challenge a second late (a loaded
    machine, a long round trip): node 0 keeps every one of them waiting for its answer,
    however many more than the 256 strangers it lets wait; none is closed to make room."""
    start(job, [], answer_after=1.0)
    counts = job.status()["counts"]
    assert counts == {"joined": NODES - 1}, counts  # no try closed early, none retried
    assert "too many unauthenticated connections" not in job.output()


def test_node_0_counts_a_connection_for_every_node_before_it_starts(tmp_path: Path) -> None:
    """Node 0 of a 5,000-node job under a hard limit of 4,096 open files: refused before
    anything starts (71), the job channel's connections counted (every other node, plus the
    256 strangers it lets wait), not halfway through the joins with "Too many open files".
    (It tells the nodes that join until --wait-timeout: none does here.)"""
    job = SwarmJob(tmp_path, 5000)
    argv = [
        malaunch_executable(), "--framework", "torch_ddp", "--topology", "volcano",
        "--nproc-per-node", "1", "--log-dir", str(tmp_path / "logs"), "--wait-timeout", "1",
        "--", *RANK,
    ]  # fmt: skip
    proc = subprocess.run(
        argv,
        env=clean_env(job.env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 4096)),
    )
    assert proc.returncode == 71, proc.stderr
    needed = re.search(
        r"^malaunch: error: 1 processes and the job channel's 5255 connections \(other nodes, "
        r"strangers\) need about (\d+) open files in the launcher, but RLIMIT_NOFILE allows "
        r"4096 \(hard limit 4096; `ulimit -n`, `ulimit -Hn`\): raise the nofile limit of the "
        r"container or host, or start fewer processes on this node$",
        proc.stderr,
        re.MULTILINE,
    )
    assert needed is not None, proc.stderr
    assert 5255 + 64 < int(needed.group(1)) < 5255 + 64 + 100
