"""When a job has succeeded: the success policy (chief or all workers) and a node that, without
the job channel, sees only itself."""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

import pytest

from malaunch.errors import UsageError
from malaunch.job.coordinator import Coordinator
from malaunch.job.protocol import Message
from malaunch.job.restart import RestartPolicy
from malaunch.job.success import ALL_WORKERS, CHIEF, has_chief, success_policy
from malaunch.models import Node
from malaunch.testing import make_ps_topology, make_topology


class Recorder:
    """Transport and scheduler in one: what was broadcast, a clock that stands still."""

    def __init__(self) -> None:
        self.sent: List[Message] = []
        self.calls: List[Tuple[float, Callable[[], None]]] = []

    def broadcast(self, message: Message) -> None:
        self.sent.append(message)

    def tell(self, node: int, message: Message) -> None:
        self.sent.append({**message, "to": node})

    def now(self) -> float:
        return 0.0

    def call_later(self, delay: float, callback: Callable[[], None]) -> object:
        self.calls.append((delay, callback))
        return object()


def running(nnodes: int, **kw: Any) -> Tuple[Coordinator, Recorder]:
    """A coordinator whose attempt 0 has started on every node."""
    recorder = Recorder()
    coordinator = Coordinator(nnodes, RestartPolicy(), transport=recorder, scheduler=recorder, **kw)
    for node in range(nnodes):
        coordinator.join(node)
    for node in range(nnodes):
        coordinator.report(node, {"t": "ready", "attempt": -1})
    assert recorder.sent[-1] == {"t": "start", "attempt": 0}
    recorder.sent.clear()
    return coordinator, recorder


CHIEF_FINISH = {
    "t": "finish",
    "attempt": 0,
    "decision": "the chief succeeded (--success-policy chief)",
}


def test_the_chief_policy_finishes_the_job_when_the_chief_succeeds() -> None:
    coordinator, sent = running(4, success=CHIEF)
    coordinator.report(2, {"t": "done", "workers": 0, "attempt": 0})  # a ps node
    assert sent.sent == []
    coordinator.report(0, {"t": "chief", "attempt": 0})
    assert sent.sent == [CHIEF_FINISH]
    assert coordinator.phase == "over"
    assert coordinator.records[-1].decision == CHIEF_FINISH["decision"]
    coordinator.report(1, {"t": "done", "workers": 1, "attempt": 0})
    assert sent.sent == [CHIEF_FINISH]  # once


def test_all_workers_ignores_the_chief() -> None:
    coordinator, sent = running(2, success=ALL_WORKERS)
    coordinator.report(0, {"t": "chief", "attempt": 0})
    assert sent.sent == []
    coordinator.report(0, {"t": "done", "workers": 1, "attempt": 0})
    coordinator.report(1, {"t": "done", "workers": 2, "attempt": 0})
    assert sent.sent[-1]["decision"] == "every worker of the job succeeded"


def test_a_chief_of_an_earlier_attempt_or_after_a_failure_finishes_nothing() -> None:
    coordinator, sent = running(2, success=CHIEF)
    coordinator.report(0, {"t": "chief", "attempt": -1})  # late: not this attempt's
    assert sent.sent == []
    failure = {"kind": "exit", "rank": 1, "role": "worker", "code": 3, "signal": None}
    coordinator.report(1, {"t": "failed", "failure": failure, "attempt": 0})
    assert sent.sent[-1]["t"] == "stop"
    coordinator.report(0, {"t": "chief", "attempt": 0})
    assert [m["t"] for m in sent.sent] == ["stop"]


def test_without_the_channel_a_node_without_workers_never_concludes_they_finished() -> None:
    # --no-job-channel: each node of a 3-node job decides alone (one node in its coordinator)
    coordinator, sent = running(1, partial=True)
    coordinator.report(0, {"t": "done", "workers": 0, "attempt": 0})
    assert sent.sent == []
    assert coordinator.phase == "running"  # its ps serve on until the launcher is signalled


def test_without_the_channel_a_node_whose_workers_succeeded_is_done() -> None:
    coordinator, sent = running(1, partial=True)
    coordinator.report(0, {"t": "done", "workers": 2, "attempt": 0})
    assert sent.sent[-1]["t"] == "finish"


def test_the_whole_job_in_one_coordinator_finishes_on_a_done_without_workers() -> None:
    # with the channel, a ps-only node saying done means: nothing of mine is left to wait for
    coordinator, sent = running(2)
    coordinator.report(0, {"t": "done", "workers": 0, "attempt": 0})
    coordinator.report(1, {"t": "done", "workers": 2, "attempt": 0})
    assert sent.sent[-1]["t"] == "finish"


def test_has_chief_by_role_or_node() -> None:
    assert has_chief(make_ps_topology(num_chief=1))
    assert not has_chief(make_ps_topology(num_chief=0))
    assert not has_chief(make_topology())
    topology = make_topology(nodes=2)
    tasks = tuple(
        Node(index=n.index, host=n.host, role=role, devices=n.devices)
        for n, role in zip(topology.nodes, ("chief", "worker"))
    )  # a Volcano job with a chief task (volcano-tasks source)
    assert has_chief(topology.model_copy(update={"nodes": tasks}))


def test_the_policy_follows_the_chief_unless_given() -> None:
    with_chief, without = make_ps_topology(num_chief=1), make_ps_topology(num_chief=0)
    assert success_policy(with_chief, None) == CHIEF
    assert success_policy(without, None) == ALL_WORKERS
    assert success_policy(with_chief, ALL_WORKERS) == ALL_WORKERS
    with pytest.raises(UsageError) as refused:
        success_policy(without, CHIEF)
    assert str(refused.value) == (
        "--success-policy chief: the cluster has no chief (topology source 'tf-ps', roles: "
        "ps, worker); use all-workers"
    )
