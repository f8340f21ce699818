"""The job's decisions, made in one place: node 0's launcher (or the only launcher).

Nodes report; the coordinator decides and tells every node, itself included, through a
:class:`Transport`. Reports: ``ready`` (the node has prepared: staged in), ``failed`` (a local
worker failed, the launcher was signalled, or the node could not prepare), ``done`` (every
local worker succeeded; ``workers``: how many it had), ``chief`` (the chief succeeded),
``hang`` (a rank was silent too long), ``stacks`` (the ranks' stacks
after a ``capture``), ``ended`` (the local group is down after a ``stop``), plus joins and
losses from the channel. Commands: ``prepare`` (every node has joined: stage in now),
``start`` (attempt N, maybe with a fresh rendezvous port),
``stop`` (final, or before a restart), ``finish`` (the job succeeded: stop services and exit
0), ``capture`` (dump your ranks' stacks).

Rules (SPEC §9): attempt 0 starts once every node has joined *and* said ``ready`` (a node
stages in once every node has joined, so that its failure reaches every other node, none of
them still on its way, and a long stage-in is not taken for a node that never came:
``--wait-timeout`` covers the joining only); a failure
before the start (a stage-in that failed, a launcher signalled) stops every node for good, as
does a node lost once all had joined; the first failure anywhere stops every node; a node that
disappears counts as failed; the job is done when every node's workers have succeeded, or, under
the ``chief`` success policy (:mod:`malaunch.job.success`), as soon as the chief has; a hang
first gathers every node's stacks, then names the odd ranks; a restart waits until every
node's group is down. A coordinator that hears only its own node of a multi-node job
(``partial``: ``--no-job-channel``) never takes a node without workers for done: the
workers its services serve run elsewhere, and it cannot hear when they finish.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Callable, Dict, List, Optional, Protocol, Set

from malaunch.hang.blame import odd_ones
from malaunch.job.protocol import Message
from malaunch.job.restart import RestartPolicy, decide
from malaunch.job.success import ALL_WORKERS, CHIEF
from malaunch.log import logger

CAPTURE_TIMEOUT = 15.0  # seconds for every node to send its stacks after a hang


class Transport(Protocol):
    """How commands reach the nodes (node 0 itself included)."""

    def broadcast(self, message: Message) -> None: ...


class Scheduler(Protocol):
    """The event loop's clock and timers."""

    def now(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> object: ...


@dataclasses.dataclass
class AttemptRecord:
    """One attempt as the summary reports it."""

    attempt: int
    started: float
    failure: Optional[Dict[str, Any]] = None
    decision: Optional[str] = None
    delay: Optional[float] = None


class Coordinator:
    """Node 0's view of the job: who joined, who is done, the first failure, the attempts."""

    def __init__(
        self,
        nnodes: int,
        policy: RestartPolicy,
        *,
        transport: Transport,
        scheduler: Scheduler,
        restart_overrides: Callable[[int], Dict[str, Any]] = lambda attempt: {},
        uniform: Callable[[float, float], float] = random.uniform,
        success: str = ALL_WORKERS,
        partial: bool = False,
    ) -> None:
        self.nnodes = nnodes
        self.policy = policy
        self.success = success
        self.partial = partial
        self.transport = transport
        self.scheduler = scheduler
        self.restart_overrides = restart_overrides
        self.uniform = uniform
        self.joined: Set[int] = set()
        self.ready: Set[int] = set()
        self.attempt = -1
        self.phase = "joining"  # preparing, running, capturing, restarting, over
        self.done: Set[int] = set()
        self.ended: Set[int] = set()
        self.failure: Optional[Dict[str, Any]] = None
        self.hang: Optional[Dict[str, Any]] = None
        self.stacks: Dict[int, List[Dict[str, Any]]] = {}
        self.records: List[AttemptRecord] = []

    # -- the channel ----------------------------------------------------------------------

    def join(self, node: int) -> None:
        self.joined.add(node)
        if self.phase == "joining" and len(self.joined) == self.nnodes:
            self.phase = "preparing"  # --wait-timeout is met: staging takes what it takes
            # Only now: a stage-in that fails must find every node connected to tell.
            self.transport.broadcast({"t": "prepare", "attempt": -1})
            self._start_when_ready()

    def _ready(self, node: int) -> None:
        self.ready.add(node)
        self._start_when_ready()

    def _start_when_ready(self) -> None:
        if self.phase == "preparing" and len(self.ready) == self.nnodes:
            self._start(0, {})

    def missing(self) -> List[int]:
        return sorted(set(range(self.nnodes)) - self.joined)

    def join_timed_out(self) -> None:
        """Not every node came before ``--wait-timeout``: the job cannot start."""
        if self.phase == "joining":
            failure = {"kind": "absent", "node": None, "nodes": self.missing(), "code": None}
            self._over(failure, "nodes never joined")

    def lost(self, node: int) -> None:
        """Node ``node``'s launcher disappeared (connection closed or heartbeats stopped)."""
        failure = {"kind": "lost", "node": node, "rank": None, "code": None}
        if self.phase in ("running", "capturing", "restarting"):
            self._failed(failure)
        elif self.phase == "preparing":
            self._over(failure, "a node was lost before the job started")
        elif self.phase == "joining":
            # may join again (a restarted pod) until --wait-timeout
            self.joined.discard(node)
            self.ready.discard(node)

    # -- reports --------------------------------------------------------------------------

    def report(self, node: int, message: Message) -> None:
        """A node's report; reports of an earlier attempt are late and ignored."""
        kind = message.get("t")
        if message.get("attempt") != self.attempt:
            return
        if kind == "failed" and isinstance(message.get("failure"), dict):
            self._failed({**message["failure"], "node": node})
        elif kind == "ready":
            self._ready(node)
        elif kind == "done":
            self._done(node, message)
        elif kind == "chief":
            self._chief_succeeded()
        elif kind == "hang" and isinstance(message.get("hang"), dict):
            self._hang({**message["hang"], "node": node})
        elif kind == "stacks" and isinstance(message.get("ranks"), list):
            self._stacks(node, message["ranks"])
        elif kind == "ended":
            self._ended(node)
        else:
            logger.warning(f"job channel: dropped a malformed {kind!r} report from node {node}")

    def _done(self, node: int, message: Message) -> None:
        if self.partial and message.get("workers") == 0:
            return  # its services serve workers elsewhere: they run until signalled
        self.done.add(node)
        if self.phase == "running" and len(self.done) == self.nnodes:
            self._finish("every worker of the job succeeded")

    def _chief_succeeded(self) -> None:
        if self.success == CHIEF and self.phase == "running":
            self._finish("the chief succeeded (--success-policy chief)")

    def _finish(self, decision: str) -> None:
        self.phase = "over"
        self.records[-1].decision = decision
        self.transport.broadcast({"t": "finish", "attempt": self.attempt, "decision": decision})

    def _failed(self, failure: Dict[str, Any]) -> None:
        if self.phase in ("joining", "preparing"):
            # nothing has started: no restart can mend a stage-in that failed, and the
            # others must not wait for a node that is gone
            self._over(failure, "a node failed before the job started")
            return
        if self.phase not in ("running", "capturing") or self.failure is not None:
            if self.phase == "restarting" and failure.get("kind") == "lost":
                self._over(failure, "a node was lost while the job restarted")
            elif self.phase == "restarting" and failure.get("kind") == "signal":
                # a launcher stopped during the back-off: the next attempt would lack it
                self._over(failure, "a node launcher was stopped while the job restarted")
            return
        self.failure = failure
        record = self.records[-1]
        record.failure = failure
        uptime = self.scheduler.now() - record.started
        restarts_done = len(self.records) - 1
        code = failure.get("code")
        verdict = decide(
            self.policy,
            restarts_done,
            kind=str(failure.get("kind")),
            code=code,
            uptime=uptime,
            uniform=self.uniform,
        )
        record.decision = verdict.reason
        if not verdict.restart:
            self._over(failure, verdict.reason)
            return
        record.delay = verdict.delay
        self.phase = "restarting"
        self.ended = set()
        stop = {"t": "stop", "attempt": self.attempt, "final": False, "failure": failure}
        # The delay goes with the decision: every node's summary records both.
        self.transport.broadcast({**stop, "decision": verdict.reason, "delay": verdict.delay})

    def _over(self, failure: Dict[str, Any], reason: str) -> None:
        self.phase = "over"
        if self.records:
            self.records[-1].failure = failure
            self.records[-1].decision = reason
        stop = {"t": "stop", "attempt": self.attempt, "final": True, "failure": failure}
        self.transport.broadcast({**stop, "decision": reason})

    def _ended(self, node: int) -> None:
        self.ended.add(node)
        if self.phase == "restarting" and len(self.ended) == self.nnodes:
            delay = self.records[-1].delay or 0.0
            attempt = self.attempt + 1
            if delay:
                logger.info(f"restarting the job (attempt {attempt}) in {delay:.1f}s")
            self.scheduler.call_later(
                delay, lambda: self._start(attempt, self.restart_overrides(attempt))
            )

    def _start(self, attempt: int, overrides: Dict[str, Any]) -> None:
        if self.phase not in ("preparing", "restarting"):
            return
        self.attempt = attempt
        self.phase = "running"
        self.done, self.ended = set(), set()
        self.failure = self.hang = None
        self.stacks = {}
        self.records.append(AttemptRecord(attempt, self.scheduler.now()))
        self.transport.broadcast({"t": "start", "attempt": attempt, **overrides})

    # -- hangs ----------------------------------------------------------------------------

    def _hang(self, hang: Dict[str, Any]) -> None:
        if self.phase != "running" or self.failure is not None:
            return
        self.phase = "capturing"
        self.hang = hang
        self.transport.broadcast({"t": "capture", "attempt": self.attempt, "hang": hang})
        attempt = self.attempt
        self.scheduler.call_later(CAPTURE_TIMEOUT, lambda: self._captured(attempt))

    def _stacks(self, node: int, ranks: List[Any]) -> None:
        if self.phase != "capturing":
            return
        self.stacks[node] = [{**entry, "node": node} for entry in ranks if isinstance(entry, dict)]
        if len(self.stacks) == self.nnodes:
            self._captured(self.attempt)

    def _captured(self, attempt: int) -> None:
        if self.phase != "capturing" or attempt != self.attempt or self.hang is None:
            return
        entries = [entry for node_entries in self.stacks.values() for entry in node_entries]
        verdict = odd_ones(entries)
        hung = [
            e
            for e in entries
            if (e.get("node"), e.get("rank")) == (self.hang.get("node"), self.hang.get("rank"))
        ]
        stack_file = hung[0].get("file") if hung else None
        hang = {
            **self.hang,
            **verdict,
            "stack_file": stack_file,
            "nodes_reporting": sorted(self.stacks),
        }
        failure = {
            "kind": "hang",
            "node": hang.get("node"),
            "rank": hang.get("rank"),
            "role": hang.get("role"),
            "code": 124,
            "hang": hang,
        }
        self.phase = "running"  # so that the failure is taken as the first
        self._failed(failure)
