"""Node 0's decisions, driven with a fake transport and a fake clock."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from malaunch.job.coordinator import CAPTURE_TIMEOUT, Coordinator
from malaunch.job.protocol import Message, encode
from malaunch.job.restart import RestartPolicy
from malaunch.log import logger
from malaunch.supervisor.attempt import describe_failure

Callback = Callable[[], None]


class FakeTransport:
    def __init__(self) -> None:
        self.sent: List[Message] = []

    def broadcast(self, message: Message) -> None:
        self.sent.append(message)

    def tell(self, node: int, message: Message) -> None:
        self.sent.append({**message, "to": node})

    def take(self) -> List[Message]:
        """What was broadcast since the last take."""
        sent, self.sent = self.sent, []
        return sent


class FakeScheduler:
    def __init__(self) -> None:
        self.time = 0.0
        self.calls: List[Tuple[float, Callback]] = []

    def now(self) -> float:
        return self.time

    def call_later(self, delay: float, callback: Callback) -> object:
        self.calls.append((delay, callback))
        return object()


class Job:
    """A coordinator with its fakes."""

    def __init__(self, nnodes: int = 2, policy: Optional[RestartPolicy] = None, **kw: Any) -> None:
        self.transport = FakeTransport()
        self.scheduler = FakeScheduler()
        self.coordinator = Coordinator(
            nnodes,
            policy or RestartPolicy(),
            transport=self.transport,
            scheduler=self.scheduler,
            **kw,
        )

    def start(self) -> None:
        for node in range(self.coordinator.nnodes):
            self.coordinator.join(node)
        for node in range(self.coordinator.nnodes):
            self.report(node, "ready")
        assert self.transport.take() == [PREPARE, {"t": "start", "attempt": 0}]

    def report(self, node: int, kind: str, **fields: Any) -> None:
        self.coordinator.report(node, {"t": kind, "attempt": self.coordinator.attempt, **fields})


PREPARE: Dict[str, Any] = {"t": "prepare", "attempt": -1}  # every node joined: stage in now
FAILURE: Dict[str, Any] = {"kind": "exit", "rank": 3, "role": "worker", "code": 2, "signal": None}
RESTARTING = RestartPolicy(max_restarts=2, backoff=(2.0, 30.0))


def quarter(low: float, high: float) -> float:
    return 0.25


# -- joining ------------------------------------------------------------------------------


def test_start_only_when_every_node_joined_and_is_ready() -> None:
    job = Job(nnodes=3)
    job.scheduler.time = 7.0
    job.coordinator.join(0)
    job.report(0, "ready")  # node 0 has nothing to stage: ready at once
    job.coordinator.join(2)
    job.coordinator.join(2)  # a node counts once
    assert job.transport.sent == []
    assert job.coordinator.phase == "joining"
    assert job.coordinator.missing() == [1]
    job.coordinator.join(1)
    assert job.coordinator.phase == "preparing"  # joined: nodes 1 and 2 still stage in
    assert job.transport.take() == [PREPARE]  # sent once every node is there to hear a failure
    job.report(2, "ready")
    job.report(2, "ready")  # counts once
    assert job.transport.sent == []
    job.scheduler.time = 9.0
    job.report(1, "ready")
    assert job.transport.take() == [{"t": "start", "attempt": 0}]
    assert job.coordinator.phase == "running"
    assert [(r.attempt, r.started) for r in job.coordinator.records] == [(0, 9.0)]
    job.coordinator.join(1)  # a late repeat starts nothing
    job.report(1, "ready")  # (of attempt 0 now: a late one)
    assert job.transport.sent == []


def test_node_lost_while_joining_must_join_again() -> None:
    job = Job(nnodes=3)
    job.coordinator.join(0)
    job.coordinator.join(1)
    job.report(1, "ready")
    job.coordinator.lost(1)  # its "ready" goes with it: the new launcher stages in again
    assert job.coordinator.missing() == [1, 2]
    job.coordinator.join(2)
    assert job.transport.sent == []
    job.coordinator.join(1)
    assert job.transport.take() == [PREPARE]
    job.report(0, "ready")
    job.report(2, "ready")
    assert job.transport.sent == []
    job.report(1, "ready")
    assert job.transport.take() == [{"t": "start", "attempt": 0}]


def test_join_timed_out_stops_the_job_naming_the_missing_nodes() -> None:
    job = Job(nnodes=4, policy=RESTARTING)
    job.coordinator.join(0)
    job.coordinator.join(2)
    job.coordinator.join_timed_out()
    failure = {"kind": "absent", "node": None, "nodes": [1, 3], "node_count": 2, "code": None}
    assert job.transport.take() == [
        {
            "t": "stop",
            "attempt": -1,
            "final": True,
            "failure": failure,
            "decision": "nodes never joined",
        }
    ]
    assert job.coordinator.phase == "over"
    assert job.coordinator.records == []


def test_thousands_of_absent_nodes_are_counted_in_a_stop_that_fits_one_message() -> None:
    job = Job(nnodes=20_000)
    for node in range(100):
        job.coordinator.join(node)
    job.coordinator.join_timed_out()
    (stop,) = job.transport.take()
    assert stop["failure"]["nodes"] == list(range(100, 164))
    assert stop["failure"]["node_count"] == 19_900
    assert len(encode(stop)) < 1000
    assert describe_failure(stop["failure"]) == (
        f"nodes {list(range(100, 164))} and 19,836 more never joined the job"
    )
    job.coordinator.join(1)
    job.coordinator.join(3)  # too late: nothing starts
    assert job.transport.sent == []


def test_the_join_timeout_does_not_cover_the_stage_in() -> None:
    job = Job(nnodes=2)
    job.coordinator.join(0)
    job.coordinator.join(1)
    job.report(1, "ready")
    assert job.transport.take() == [PREPARE]
    job.coordinator.join_timed_out()  # node 0 still stages in: that is no absence
    assert job.transport.sent == []
    assert job.coordinator.phase == "preparing"
    job.report(0, "ready")
    assert job.transport.take() == [{"t": "start", "attempt": 0}]


STAGE_IN_FAILED: Dict[str, Any] = {"kind": "stage-in", "rank": None, "code": 66, "reason": "x"}


@pytest.mark.parametrize("joined", [(0, 1), (0, 1, 2)], ids=["joining", "preparing"])
def test_a_failure_before_the_start_stops_every_node_for_good(joined: Tuple[int, ...]) -> None:
    job = Job(nnodes=3, policy=RESTARTING)  # no restart mends a stage-in that failed
    for node in joined:
        job.coordinator.join(node)
    job.report(0, "ready")
    job.report(1, "failed", failure=STAGE_IN_FAILED)  # (a signalled node, while joining)
    failure = {**STAGE_IN_FAILED, "node": 1}
    stop = {
        "t": "stop",
        "attempt": -1,
        "final": True,
        "failure": failure,
        "decision": "a node failed before the job started",
    }
    assert job.transport.take() == [PREPARE] * (len(joined) == 3) + [stop]
    # Node 2, still to join, hears it as it joins.
    assert job.coordinator.phase == ("telling" if len(joined) == 2 else "over")
    if len(joined) == 2:
        job.coordinator.join(2)
        assert job.transport.take() == [{**stop, "to": 2}]
    for node in range(3):
        job.report(node, "ready")
    assert job.coordinator.phase == "over"
    job.report(2, "failed", failure=STAGE_IN_FAILED)  # a second failure: no second stop
    job.coordinator.join_timed_out()
    assert job.transport.sent == []


PLAN_REFUSED: Dict[str, Any] = {"kind": "prestart", "rank": None, "code": 64, "reason": "no"}


def test_nodes_that_join_after_a_failure_before_the_start_hear_why() -> None:
    job = Job(nnodes=4)
    job.coordinator.join(0)
    job.report(0, "failed", failure=PLAN_REFUSED)  # node 0 could not plan
    stop = {
        "t": "stop",
        "attempt": -1,
        "final": True,
        "failure": {**PLAN_REFUSED, "node": 0},
        "decision": "a node failed before the job started",
    }
    assert job.transport.take() == [stop]
    for node in (2, 1):
        assert job.coordinator.phase == "telling"  # node 0's launcher stays to tell them
        job.coordinator.join(node)
        assert job.transport.take() == [{**stop, "to": node}]
    job.coordinator.lost(1)  # told, gone: nothing to decide
    job.report(2, "ready")
    assert job.transport.sent == []
    job.coordinator.join_timed_out()  # node 3 never came: node 0 leaves untold
    assert job.coordinator.phase == "over"
    job.coordinator.join(3)
    assert job.transport.sent == []
    assert job.coordinator.records == []


def test_a_signal_ends_the_telling() -> None:
    job = Job(nnodes=2)
    job.coordinator.join(0)
    job.report(0, "failed", failure=PLAN_REFUSED)
    job.coordinator.stop_telling()
    assert job.coordinator.phase == "over"
    job.transport.take()
    job.coordinator.join(1)
    assert job.transport.sent == []


def test_a_node_lost_while_the_others_stage_in_stops_the_job() -> None:
    job = Job(nnodes=2)
    job.coordinator.join(0)
    job.coordinator.join(1)
    job.coordinator.lost(1)
    lost = {"kind": "lost", "node": 1, "rank": None, "code": None}
    assert job.transport.take() == [
        PREPARE,
        {
            "t": "stop",
            "attempt": -1,
            "final": True,
            "failure": lost,
            "decision": "a node was lost before the job started",
        },
    ]


def test_join_timed_out_after_the_start_changes_nothing() -> None:
    job = Job()
    job.start()
    job.coordinator.join_timed_out()
    assert job.transport.sent == []
    assert job.coordinator.phase == "running"


# -- success ------------------------------------------------------------------------------


def test_done_from_every_node_finishes_the_job() -> None:
    job = Job(nnodes=3)
    job.start()
    job.report(0, "done")
    job.report(2, "done")
    job.report(2, "done")  # twice from one node is still one node
    assert job.transport.sent == []
    job.report(1, "done")
    decision = "every worker of the job succeeded"
    assert job.transport.take() == [{"t": "finish", "attempt": 0, "decision": decision}]
    assert job.coordinator.phase == "over"
    assert job.coordinator.records[-1].decision == decision
    assert job.coordinator.records[-1].failure is None


# -- failures -----------------------------------------------------------------------------


def test_first_failure_wins_and_stops_for_good_without_restarts() -> None:
    job = Job(nnodes=3)
    job.start()
    job.report(1, "failed", failure=FAILURE)
    first = {**FAILURE, "node": 1}
    decision = "no restarts allowed (--max-restarts 0)"
    assert job.transport.take() == [
        {"t": "stop", "attempt": 0, "final": True, "failure": first, "decision": decision}
    ]
    job.report(2, "failed", failure={**FAILURE, "rank": 5, "code": 75})
    job.coordinator.lost(0)
    job.report(0, "done")
    job.report(1, "done")
    job.report(2, "done")
    assert job.transport.sent == []
    assert job.coordinator.failure == first
    record = job.coordinator.records[-1]
    assert (record.failure, record.decision, record.delay) == (first, decision, None)


def test_failure_before_min_uptime_is_not_restarted() -> None:
    job = Job(policy=RestartPolicy(max_restarts=3, min_uptime=60.0))
    job.scheduler.time = 100.0
    job.start()
    job.scheduler.time = 130.0
    job.report(0, "failed", failure=FAILURE)
    (stop,) = job.transport.take()
    assert stop["final"] is True
    assert stop["decision"] == "failed after 30.0s, before --min-uptime 60s: a start-up crash"


def test_restart_waits_for_every_node_to_end_then_for_the_back_off() -> None:
    overrides: List[int] = []

    def restart_overrides(attempt: int) -> Dict[str, Any]:
        overrides.append(attempt)
        return {"master_port": 29600 + attempt}

    job = Job(nnodes=3, policy=RESTARTING, restart_overrides=restart_overrides, uniform=quarter)
    job.start()
    job.report(2, "ended")  # before the stop: does not count
    job.scheduler.time = 50.0
    job.report(1, "failed", failure=FAILURE)
    failure = {**FAILURE, "node": 1}
    assert job.transport.take() == [
        {
            "t": "stop",
            "attempt": 0,
            "final": False,
            "failure": failure,
            "decision": "restart 1 of 2",
            "delay": 1.25,
            "said": "restart 1 of 2 after a 1.2s back-off",
        }
    ]
    assert job.coordinator.phase == "restarting"
    # A second failure of the same attempt changes nothing.
    job.report(0, "failed", failure={**FAILURE, "rank": 0})
    job.report(0, "ended")
    job.report(1, "ended")
    job.coordinator.report(2, {"t": "ended", "attempt": 1})  # not this attempt's
    job.coordinator.report(2, {"t": "ended"})  # no attempt at all
    assert job.scheduler.calls == []
    assert job.transport.sent == []
    job.report(2, "ended")
    # base 2 for restart 1: full 2, half fixed plus uniform(0, 1) = 0.25
    assert [delay for delay, _ in job.scheduler.calls] == [1.25]
    assert job.transport.sent == []
    assert overrides == []
    job.scheduler.time = 51.25
    job.scheduler.calls.pop()[1]()
    assert job.transport.take() == [{"t": "start", "attempt": 1, "master_port": 29601}]
    assert overrides == [1]
    assert job.coordinator.phase == "running"
    assert job.coordinator.failure is None
    records = job.coordinator.records
    assert [(r.attempt, r.started) for r in records] == [(0, 0.0), (1, 51.25)]
    assert (records[0].failure, records[0].decision, records[0].delay) == (
        failure,
        "restart 1 of 2",
        1.25,
    )
    # Late reports of attempt 0 are ignored; those of attempt 1 count.
    for node in range(3):
        job.coordinator.report(node, {"t": "done", "attempt": 0})
    job.coordinator.report(0, {"t": "failed", "attempt": 0, "failure": FAILURE})
    assert job.transport.sent == []
    for node in range(3):
        job.report(node, "done")
    assert job.transport.take() == [
        {"t": "finish", "attempt": 1, "decision": "every worker of the job succeeded"}
    ]


def test_restarts_until_used_up() -> None:
    job = Job(nnodes=2, policy=RestartPolicy(max_restarts=1, backoff=(0.0, 0.0)))
    job.start()
    job.report(0, "failed", failure=FAILURE)
    assert job.transport.take()[0]["final"] is False
    job.report(0, "ended")
    job.report(1, "ended")
    assert [delay for delay, _ in job.scheduler.calls] == [0.0]
    job.scheduler.calls.pop()[1]()
    assert job.transport.take() == [{"t": "start", "attempt": 1}]
    job.report(1, "failed", failure=FAILURE)
    assert job.transport.take() == [
        {
            "t": "stop",
            "attempt": 1,
            "final": True,
            "failure": {**FAILURE, "node": 1},
            "decision": "--max-restarts 1 used up",
            "said": "no restart left: --max-restarts 1 used up",
        }
    ]
    assert job.scheduler.calls == []


@pytest.mark.parametrize(
    ("policy", "decision"),
    [
        (RestartPolicy(), "no restarts allowed (--max-restarts 0)"),
        (
            RestartPolicy(max_restarts=2, rejoin_timeout=0),
            "--rejoin-timeout 0: a lost node is not replaced",
        ),
    ],
)
def test_lost_node_ends_the_job_when_it_cannot_be_replaced(
    policy: RestartPolicy, decision: str
) -> None:
    job = Job(nnodes=3, policy=policy)
    job.start()
    job.coordinator.lost(2)
    failure = {"kind": "lost", "node": 2, "rank": None, "code": None}
    assert job.transport.take() == [
        {"t": "stop", "attempt": 0, "final": True, "failure": failure, "decision": decision}
        # said on every node's console when restarts were asked for
        | ({"said": f"no restart: {decision}"} if policy.max_restarts else {})
    ]
    assert job.coordinator.phase == "over"


def test_lost_node_while_restarting_ends_the_job_without_replacement() -> None:
    policy = RestartPolicy(max_restarts=2, backoff=(2.0, 30.0), rejoin_timeout=0)
    job = Job(nnodes=2, policy=policy, uniform=quarter)
    job.start()
    job.report(0, "failed", failure=FAILURE)
    job.transport.take()
    job.report(0, "ended")
    job.report(1, "ended")
    assert len(job.scheduler.calls) == 1
    job.coordinator.lost(1)
    lost = {"kind": "lost", "node": 1, "rank": None, "code": None}
    assert job.transport.take() == [
        {
            "t": "stop",
            "attempt": 0,
            "final": True,
            "failure": lost,
            "decision": "--rejoin-timeout 0: a lost node is not replaced",
        }
    ]
    job.scheduler.calls.pop()[1]()  # the back-off ends: nothing starts any more
    assert job.transport.sent == []
    assert job.coordinator.phase == "over"


@pytest.fixture
def messages() -> Iterator[List[str]]:
    """The launcher's own messages, one string per message.

    Added through malaunch's lazy logger, so that a sink setup still pending from the CLI
    runs before this sink is added (it removes every sink it finds)."""
    caught: List[str] = []
    sink = logger.add(lambda message: caught.append(str(message).rstrip("\n")), format="{message}")
    yield caught
    logger.remove(sink)


def assert_unchanged(job: Job) -> None:
    assert job.transport.sent == []
    assert job.scheduler.calls == []
    assert job.coordinator.phase == "running"
    assert job.coordinator.failure is None
    assert job.coordinator.records[-1].failure is None
    # The job still works afterwards.
    job.report(0, "failed", failure=FAILURE)
    assert job.transport.take()[0]["failure"] == {**FAILURE, "node": 0}


@pytest.mark.parametrize(
    "message",
    [
        {"t": "failed", "attempt": 0},
        {"t": "failed", "attempt": 0, "failure": "exit 2"},
        {"t": "hang", "attempt": 0, "hang": None},
        {"t": "stacks", "attempt": 0, "ranks": {"rank": 0}},
        {"t": "bogus", "attempt": 0},
    ],
)
def test_malformed_report_is_dropped(message: Message, messages: List[str]) -> None:
    job = Job(nnodes=2)
    job.start()
    job.coordinator.report(1, message)
    assert messages == [f"job channel: dropped a malformed {message['t']!r} report from node 1"]
    assert_unchanged(job)


@pytest.mark.parametrize(
    "message",
    [
        {"t": "failed", "attempt": None, "failure": FAILURE},
        {"t": "failed", "failure": FAILURE},
        {"t": "failed", "attempt": "0", "failure": FAILURE},
        {"t": "failed", "attempt": 1, "failure": FAILURE},
        {"t": "done", "attempt": -1},
    ],
)
def test_report_of_another_attempt_is_ignored(message: Message) -> None:
    job = Job(nnodes=2)
    job.start()
    job.coordinator.report(1, message)
    job.coordinator.report(0, {**message, "t": "done"})
    assert_unchanged(job)


# -- hangs --------------------------------------------------------------------------------

HANG: Dict[str, Any] = {"rank": 3, "role": "worker", "silent": 30.0}
WAITING = "allreduce (collectives.py:42)"
STUCK = "read_batch (data.py:7)"


def entry(rank: int, frame: str) -> Dict[str, Any]:
    return {"rank": rank, "frames": [frame, "train (train.py:3)"], "file": f"/logs/stack-{rank}"}


def start_hang(job: Job) -> Callback:
    job.start()
    job.report(1, "hang", hang=HANG)
    assert job.transport.take() == [{"t": "capture", "attempt": 0, "hang": {**HANG, "node": 1}}]
    assert job.coordinator.phase == "capturing"
    ((delay, callback),) = job.scheduler.calls
    assert delay == CAPTURE_TIMEOUT
    job.scheduler.calls.clear()
    return callback


def test_hang_captures_stacks_then_names_the_culprit() -> None:
    job = Job(nnodes=2)
    timeout = start_hang(job)
    job.report(0, "hang", hang={**HANG, "rank": 0})  # one capture at a time
    job.report(0, "stacks", ranks=[entry(0, WAITING), entry(1, WAITING)])
    assert job.transport.sent == []
    job.report(1, "stacks", ranks=[entry(2, WAITING), entry(3, STUCK), "junk"])
    (stop,) = job.transport.take()
    assert (stop["t"], stop["attempt"], stop["final"]) == ("stop", 0, True)
    failure = stop["failure"]
    assert {k: failure[k] for k in ("kind", "node", "rank", "role", "code")} == {
        "kind": "hang",
        "node": 1,
        "rank": 3,
        "role": "worker",
        "code": 124,
    }
    hang = failure["hang"]
    assert hang["culprits"] == [3]
    assert hang["groups"] == [
        {"frame": WAITING, "ranks": [0, 1, 2]},
        {"frame": STUCK, "ranks": [3]},
    ]
    assert hang["stack_file"] == "/logs/stack-3"
    assert hang["nodes_reporting"] == [0, 1]
    assert (hang["silent"], hang["node"], hang["rank"]) == (30.0, 1, 3)
    assert job.coordinator.stacks[1][0]["node"] == 1  # entries are tagged with their node
    assert job.coordinator.records[-1].failure == failure
    timeout()  # the capture timeout comes later and changes nothing
    assert job.transport.sent == []


def test_capture_timeout_uses_the_stacks_that_came() -> None:
    job = Job(nnodes=3)
    timeout = start_hang(job)
    job.report(0, "stacks", ranks=[entry(0, WAITING), entry(1, STUCK)])
    job.report(2, "stacks", ranks=[entry(4, WAITING), entry(5, WAITING)])
    assert job.transport.sent == []
    job.scheduler.time = CAPTURE_TIMEOUT
    timeout()
    (stop,) = job.transport.take()
    hang = stop["failure"]["hang"]
    assert stop["failure"]["kind"] == "hang"
    assert stop["failure"]["code"] == 124
    assert hang["nodes_reporting"] == [0, 2]
    assert hang["nodes_silent"] == [1]  # given up on: every summary says so
    assert hang["stack_file"] is None  # node 1's hung rank sent nothing
    assert hang["culprits"] == [1]
    # Stacks that arrive after the verdict change nothing.
    job.report(1, "stacks", ranks=[entry(3, STUCK)])
    assert job.transport.sent == []


def test_failure_during_capture_wins_over_the_hang() -> None:
    job = Job(nnodes=2)
    timeout = start_hang(job)
    job.report(0, "failed", failure=FAILURE)
    (stop,) = job.transport.take()
    assert stop["failure"] == {**FAILURE, "node": 0}
    job.report(0, "stacks", ranks=[entry(0, WAITING)])
    job.report(1, "stacks", ranks=[entry(3, STUCK)])
    timeout()
    assert job.transport.sent == []


def test_hang_is_restarted_and_an_old_capture_timeout_is_ignored() -> None:
    job = Job(nnodes=2, policy=RestartPolicy(max_restarts=1, backoff=(0.0, 0.0)))
    old_timeout = start_hang(job)
    job.report(0, "stacks", ranks=[entry(0, WAITING)])
    job.report(1, "stacks", ranks=[entry(3, STUCK)])
    (stop,) = job.transport.take()
    assert (stop["final"], stop["failure"]["kind"], stop["decision"]) == (
        False,
        "hang",
        "restart 1 of 1",
    )
    job.report(0, "ended")
    job.report(1, "ended")
    job.scheduler.calls.pop()[1]()
    assert job.transport.take() == [{"t": "start", "attempt": 1}]
    job.report(0, "hang", hang=HANG)
    assert job.transport.take()[0]["t"] == "capture"
    old_timeout()  # attempt 0's timeout: not this capture's
    assert job.transport.sent == []
    assert job.coordinator.phase == "capturing"
