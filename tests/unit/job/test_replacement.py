"""Node 0's decisions about lost nodes and their replacements (SPEC §9 "Replacement"),
driven with the fake transport and clock of test_coordinator."""

from __future__ import annotations

from typing import Any, Dict

from malaunch.job.restart import RestartPolicy

from .test_coordinator import FAILURE, PREPARE, Job

POLICY = RestartPolicy(max_restarts=2, backoff=(2.0, 30.0), rejoin_timeout=300.0)
LOST_2: Dict[str, Any] = {"kind": "lost", "node": 2, "rank": None, "code": None}


def wall() -> float:
    return 1000.0


def lost_job(nnodes: int = 3, policy: RestartPolicy = POLICY) -> Job:
    job = Job(nnodes=nnodes, policy=policy, wall=wall)
    job.start()
    job.scheduler.time = 10.0
    job.coordinator.lost(2)
    return job


def waiting_stop(attempt: int = 0, failure: Any = None, node: int = 2) -> Dict[str, Any]:
    return {
        "t": "stop",
        "attempt": attempt,
        "final": False,
        "failure": failure or LOST_2,
        "decision": f"restart {attempt + 1} of 2: waiting up to 300s for node {node}'s replacement",
        "delay": 0.0,
        "replace": node,
        "rejoin_timeout": 300.0,
    }


def test_a_lost_node_is_awaited_and_its_replacement_starts_the_next_attempt() -> None:
    job = lost_job()
    assert job.transport.take() == [waiting_stop()]
    assert job.coordinator.phase == "restarting"
    job.report(0, "ended")
    job.report(1, "ended")
    assert job.transport.sent == []  # every group is down, but node 2 is missing
    job.scheduler.time = 14.5
    job.coordinator.join(2, host="127.0.0.9")
    assert job.transport.take() == [{"t": "prepare", "attempt": 0}]  # it stages in first
    job.coordinator.report(0, {"t": "ready", "attempt": 0})  # the others say it again
    job.coordinator.report(2, {"t": "ready", "attempt": 0})
    assert job.transport.sent == []
    delay, start = job.scheduler.calls[-1]
    assert delay == 0.0  # no back-off: the wait for the replacement was the pause
    start()
    assert job.transport.take() == [
        {
            "t": "start",
            "attempt": 1,
            "losses": [{"node": 2, "lost_at": 1000.0, "rejoin_seconds": 4.5}],
            "hosts": {"2": "127.0.0.9"},
        }
    ]
    record = job.coordinator.records[0]
    assert (record.failure, record.decision) == (LOST_2, waiting_stop()["decision"])


def test_every_later_attempt_keeps_the_replacements_address() -> None:
    job = lost_job()
    job.report(0, "ended")
    job.report(1, "ended")
    job.coordinator.join(2, host="10.1.2.3")
    job.coordinator.report(2, {"t": "ready", "attempt": 0})
    job.scheduler.calls[-1][1]()
    job.transport.take()
    job.report(1, "failed", failure=FAILURE)
    job.transport.take()
    for node in range(3):
        job.report(node, "ended")
    job.scheduler.calls[-1][1]()
    assert job.transport.take() == [{"t": "start", "attempt": 2, "hosts": {"2": "10.1.2.3"}}]


def test_a_replacement_that_never_comes_ends_the_job_saying_so() -> None:
    job = lost_job()
    job.transport.take()
    delay, timed_out = job.scheduler.calls[-1]
    assert delay == 300.0
    timed_out()
    failure = {**LOST_2, "reason": "its replacement did not join within --rejoin-timeout 300s"}
    assert job.transport.take() == [
        {
            "t": "stop",
            "attempt": 0,
            "final": True,
            "failure": failure,
            "decision": "node 2 never came back within --rejoin-timeout 300s",
            "losses": [{"node": 2, "lost_at": 1000.0, "rejoin_seconds": None}],
            "said": "no restart: node 2 never came back within --rejoin-timeout 300s",
        }
    ]
    assert job.coordinator.phase == "over"
    job.coordinator.join(2)  # too late: nothing
    assert job.transport.sent == []


def test_a_replacement_in_time_disarms_the_timeout() -> None:
    job = lost_job()
    timed_out = job.scheduler.calls[-1][1]
    job.coordinator.join(2)
    job.transport.take()
    timed_out()
    assert job.transport.sent == []
    assert job.coordinator.phase == "restarting"


def test_a_node_lost_after_the_last_restart_ends_the_job() -> None:
    job = Job(nnodes=3, policy=RestartPolicy(max_restarts=1, rejoin_timeout=300.0), wall=wall)
    job.start()
    job.report(1, "failed", failure=FAILURE)
    job.transport.take()
    for node in range(3):
        job.report(node, "ended")
    job.scheduler.calls[-1][1]()
    assert job.transport.take()[0]["attempt"] == 1
    job.coordinator.lost(2)
    assert job.transport.take() == [
        {
            "t": "stop",
            "attempt": 1,
            "final": True,
            "failure": LOST_2,
            "decision": "--max-restarts 1 used up",
            "said": "no restart left: --max-restarts 1 used up",
        }
    ]


def test_a_launcher_stopped_by_its_platform_is_replaced_too() -> None:
    job = Job(nnodes=3, policy=POLICY, wall=wall)
    job.start()
    evicted = {"kind": "signal", "rank": None, "code": 143, "signal": "SIGTERM"}
    job.report(2, "failed", failure=evicted)
    assert job.transport.take() == [waiting_stop(failure={**evicted, "node": 2})]


def test_node_0_stopped_by_its_platform_leaves_the_others_waiting_for_its_replacement() -> None:
    job = Job(nnodes=3, policy=POLICY, wall=wall)
    job.start()
    evicted = {"kind": "signal", "rank": None, "code": 143, "signal": "SIGTERM"}
    job.report(0, "failed", failure=evicted)
    assert job.transport.take() == [waiting_stop(failure={**evicted, "node": 0}, node=0)]
    assert job.coordinator.phase == "over"  # this launcher leaves; no timer of its own
    assert job.scheduler.calls == []


def test_a_node_lost_during_the_back_off_is_awaited_before_the_restart() -> None:
    job = Job(nnodes=3, policy=POLICY, wall=wall)
    job.start()
    job.report(1, "failed", failure=FAILURE)
    job.transport.take()
    for node in range(3):
        job.report(node, "ended")
    back_off = job.scheduler.calls[-1][1]
    job.coordinator.lost(2)
    assert job.transport.take()[0]["replace"] == 2
    back_off()  # the back-off ends while node 2 is missing: nothing starts
    assert job.transport.sent == []
    job.coordinator.join(2)
    job.coordinator.report(2, {"t": "ready", "attempt": -1})
    assert job.transport.take() == [{"t": "prepare", "attempt": 0}]
    job.scheduler.calls[-1][1]()
    started = job.transport.take()
    assert [(m["t"], m["attempt"]) for m in started] == [("start", 1)]
    assert job.coordinator.records[0].decision == "restart 1 of 2"  # one restart, not two


def test_a_new_node_0_adopts_the_job_from_the_survivors() -> None:
    job = Job(nnodes=3, policy=POLICY, wall=wall)
    coordinator = job.coordinator
    job.scheduler.time = 50.0
    coordinator.join(0)
    coordinator.report(0, {"t": "ready", "attempt": -1})
    lost_0 = {"kind": "lost", "node": 0, "rank": None, "code": None}
    for node, waited in ((1, 6.0), (2, 7.5)):
        coordinator.join(node)
        coordinator.report(node, {"t": "resume", "attempt": 1, "failure": lost_0, "waited": waited})
    assert job.transport.take() == [PREPARE]
    coordinator.report(1, {"t": "ready", "attempt": 1})
    coordinator.report(2, {"t": "ready", "attempt": 1})
    assert job.transport.take() == [
        {
            "t": "start",
            "attempt": 2,
            "losses": [{"node": 0, "lost_at": 992.5, "rejoin_seconds": 7.5}],
        }
    ]
    first, second = coordinator.records
    assert (first.attempt, first.failure) == (1, lost_0)
    assert first.decision == "restart 2 of 2: node 0 was replaced"
    assert second.attempt == 2


def test_a_new_node_0_ends_the_job_when_the_adopted_budget_is_used_up() -> None:
    job = Job(nnodes=2, policy=POLICY, wall=wall)
    coordinator = job.coordinator
    coordinator.join(0)
    coordinator.report(0, {"t": "ready", "attempt": -1})
    coordinator.join(1)
    coordinator.report(1, {"t": "resume", "attempt": 2, "failure": None, "waited": 1})
    coordinator.report(1, {"t": "ready", "attempt": 2})
    lost_0 = {"kind": "lost", "node": 0, "rank": None, "code": None}
    assert job.transport.take() == [
        PREPARE,
        {
            "t": "stop",
            "attempt": 2,
            "final": True,
            "failure": lost_0,
            "decision": "--max-restarts 2 used up",
        },
    ]


def test_resume_reports_are_read_only_before_the_start() -> None:
    job = Job(nnodes=2, policy=POLICY, wall=wall)
    job.start()
    job.coordinator.report(1, {"t": "resume", "attempt": 5, "failure": None, "waited": 1})
    assert job.coordinator.attempt == 0
    assert job.coordinator.replacing.adopted is None


def test_a_one_node_job_has_nobody_to_wait_for_a_replacement() -> None:
    job = Job(nnodes=1, policy=POLICY, wall=wall)
    job.start()
    signalled = {"kind": "signal", "rank": None, "code": 143, "signal": "SIGTERM"}
    job.report(0, "failed", failure=signalled)
    [stop] = job.transport.take()
    assert (stop["final"], stop["decision"]) == (
        True,
        "a failure of kind 'signal' is never restarted",
    )


def test_a_new_node_0_counts_the_adopted_restarts_for_a_rank_failure_too() -> None:
    """Node 0 is lost in attempt 1 (restart 1 of 2 used) and replaced: the new node 0 starts
    attempt 2, the last restart. A rank that fails there ends the job: the budget counts the
    attempts the job has had, not the ones this node 0 has seen (two)."""
    job = Job(nnodes=2, policy=POLICY, wall=wall)
    coordinator = job.coordinator
    coordinator.join(0)
    coordinator.report(0, {"t": "ready", "attempt": -1})
    lost_0 = {"kind": "lost", "node": 0, "rank": None, "code": None}
    coordinator.join(1)
    coordinator.report(1, {"t": "resume", "attempt": 1, "failure": lost_0, "waited": 2.0})
    coordinator.report(1, {"t": "ready", "attempt": 1})
    assert [m["t"] for m in job.transport.take()] == ["prepare", "start"]
    assert coordinator.attempt == 2
    assert coordinator.records[0].decision == "restart 2 of 2: node 0 was replaced"
    job.report(1, "failed", failure=FAILURE)
    [stop] = job.transport.take()
    assert (stop["final"], stop["decision"]) == (True, "--max-restarts 2 used up")
