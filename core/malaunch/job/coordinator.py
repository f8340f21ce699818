"""The job's decisions, made in one place: node 0's launcher (or the only launcher).

Nodes report; the coordinator decides and tells every node, itself included, through a
:class:`Transport`. Reports: ``ready`` (the node has prepared: staged in), ``failed`` (a local
worker failed, the launcher was signalled, or the node could not prepare), ``done`` (every
local worker succeeded; ``workers``: how many it had), ``chief`` (the chief succeeded),
``hang`` (a rank was silent too long), ``stacks`` (the ranks' stacks
after a ``capture``), ``ended`` (the local group is down after a ``stop``), plus joins and
losses from the channel. Commands: ``prepare`` (every node has joined: stage in now),
``start`` (attempt N, maybe with a fresh rendezvous port, the losses of the attempt before and
the addresses replaced nodes came from),
``stop`` (final, or before a restart), ``finish`` (the job succeeded: stop services and exit
0), ``capture`` (dump your ranks' stacks).

Rules (SPEC §9): attempt 0 starts once every node has joined *and* said ``ready`` (a node
stages in once every node has joined, so that its failure reaches every other node, none of
them still on its way, and a long stage-in is not taken for a node that never came:
``--wait-timeout`` covers the joining only); a failure
before the start (a node that could not plan, a stage-in that failed, a launcher signalled)
stops every node for good, as does a node lost once all had joined: the nodes that have joined
hear why at once, and while some have not (``telling``) each hears it as it joins, until every
node has or ``--wait-timeout`` is over; the first failure anywhere stops every node; a node that
disappears counts as failed; the job is done when every node's workers have succeeded, or, under
the ``chief`` success policy (:mod:`malaunch.job.success`), as soon as the chief has; a hang
first gathers every node's stacks, then names the odd ranks; a restart waits until every
node's group is down. A coordinator that hears only its own node of a multi-node job
(``partial``: ``--no-job-channel``) never takes a node without workers for done: the
workers its services serve run elsewhere, and it cannot hear when they finish.

Replacement (:mod:`malaunch.job.replacement`): a node lost after the start ends the attempt;
while restarts remain the job waits (``restarting``, the node awaited) for its replacement,
then starts the next attempt; a new node 0 adopts the job from the survivors' ``resume``.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable, Dict, List, Optional, Set

from malaunch.hang.blame import hang_record
from malaunch.job.protocol import Message
from malaunch.job.records import AttemptRecord, Scheduler, Transport
from malaunch.job.replacement import (
    Loss,
    Replacements,
    absent,
    lost_node,
    never_came_back,
    waiting_stop,
)
from malaunch.job.restart import REPLACEABLE, RestartPolicy, decide, replacement
from malaunch.job.success import ALL_WORKERS, CHIEF
from malaunch.log import logger

CAPTURE_TIMEOUT = 15.0  # seconds for every node to send its stacks after a hang
RUNNING_OR_RESTARTING = ("running", "capturing", "restarting")


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
        wall: Callable[[], float] = time.time,
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
        self.phase = "joining"  # preparing, running, capturing, restarting, telling, over
        self.done: Set[int] = set()
        self.ended: Set[int] = set()
        self.failure: Optional[Dict[str, Any]] = None
        self.hang: Optional[Dict[str, Any]] = None
        self.stacks: Dict[int, List[Dict[str, Any]]] = {}
        self.records: List[AttemptRecord] = []
        self.replacing = Replacements(scheduler.now, wall)
        self.restart_at: Optional[float] = None  # when the next attempt may start (back-off)
        self.restart_pending = False  # its start is scheduled
        self.verdict: Optional[Message] = None  # the final stop, for nodes that join after it

    # -- the channel ----------------------------------------------------------------------

    def join(self, node: int, host: Optional[str] = None) -> None:
        """Node ``node``'s launcher joined (``host``: the address it says it has)."""
        self.joined.add(node)
        if self.phase == "telling":
            self._tell_late_joiner(node)
        elif self.phase == "restarting":
            self._rejoined(node, host)
        elif self.phase == "joining" and len(self.joined) == self.nnodes:
            self.phase = "preparing"  # --wait-timeout is met: staging takes what it takes
            # Only now: a stage-in that fails must find every node connected to tell.
            self.transport.broadcast({"t": "prepare", "attempt": -1})
            self._start_when_ready()

    def _ready(self, node: int) -> None:
        self.ready.add(node)
        self._start_when_ready()
        self._maybe_restart()

    def _start_when_ready(self) -> None:
        if self.phase == "preparing" and len(self.ready) == self.nnodes:
            if self.replacing.adopted is not None:
                self._resume_job()
            else:
                self._start(0, {})

    def missing(self) -> List[int]:
        return sorted(set(range(self.nnodes)) - self.joined)

    def _tell_late_joiner(self, node: int) -> None:
        """The job ended before its start: a node that joins now hears why at once; once
        every node has heard, node 0 may leave."""
        assert self.verdict is not None
        self.transport.tell(node, self.verdict)
        if not self.missing():
            self.phase = "over"

    def stop_telling(self) -> None:
        """Node 0's launcher leaves (it was signalled): the nodes still to join go untold."""
        if self.phase == "telling":
            self.phase = "over"

    def join_timed_out(self) -> None:
        """Not every node came before ``--wait-timeout``: the job cannot start (or, ended
        before its start, it has told every node that came)."""
        if self.phase == "joining":
            self._over(absent(self.missing()), "nodes never joined")
        elif self.phase == "telling":
            self.phase = "over"

    def lost(self, node: int) -> None:
        """Node ``node``'s launcher disappeared (connection closed or heartbeats stopped)."""
        failure = lost_node(node)
        if self.phase in RUNNING_OR_RESTARTING:
            self._failed(failure)
        elif self.phase == "preparing":
            self._over(failure, "a node was lost before the job started")
        elif self.phase == "joining":  # may join again (a restarted pod) until --wait-timeout
            self.joined.discard(node)
            self.ready.discard(node)

    # -- reports --------------------------------------------------------------------------

    def report(self, node: int, message: Message) -> None:
        """A node's report; reports of an earlier attempt are late and ignored."""
        kind = message.get("t")
        if kind == "ready":  # of whichever attempt: a survivor says it again to a new node 0
            self._ready(node)
            return
        if kind == "resume":
            self._adopt(message)
            return
        if message.get("attempt") != self.attempt:
            return
        if kind == "failed" and isinstance(message.get("failure"), dict):
            self._failed({**message["failure"], "node": node})
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
        replaceable = failure.get("kind") in REPLACEABLE and self.nnodes > 1  # someone waits
        if replaceable and self.phase in RUNNING_OR_RESTARTING:
            self._replace(failure)
            return
        if self.phase in ("joining", "preparing"):
            # nothing has started: no restart can mend a plan or a stage-in that failed, and
            # the others must not wait for a node that is gone
            self._over(failure, "a node failed before the job started")
            if self.missing():
                self.phase = "telling"  # who joins later hears why as it joins
            return
        if self.phase not in ("running", "capturing") or self.failure is not None:
            if self.phase == "restarting" and failure.get("kind") == "stage-in":
                self._over(failure, "a replacement node could not prepare")
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
            self._over(failure, verdict.reason, verdict.said)
            return
        record.delay = verdict.delay
        self.phase = "restarting"
        self.restart_at = self.scheduler.now() + verdict.delay
        self.ended = set()
        stop = {"t": "stop", "attempt": self.attempt, "final": False, "failure": failure}
        # The delay goes with the decision: every node's summary records both.
        self.transport.broadcast({**stop, **verdict.fields()})

    def _over(self, failure: Dict[str, Any], reason: str, said: Optional[str] = None) -> None:
        self.phase = "over"
        if self.records:
            self.records[-1].failure = failure
            self.records[-1].decision = reason
        stop = {"t": "stop", "attempt": self.attempt, "final": True, "failure": failure}
        extra = {**self.replacing.start_fields(), **({"said": said} if said else {})}
        self.verdict = {**stop, "decision": reason, **extra}
        self.transport.broadcast(self.verdict)

    def _ended(self, node: int) -> None:
        self.ended.add(node)
        self._maybe_restart()

    def _maybe_restart(self) -> None:
        """Start the next attempt once every group is down, no replacement is awaited and
        every node is ready (a replacement has prepared), after what is left of the back-off."""
        missing = self._missing() or len(self.ended) < self.nnodes
        if self.phase != "restarting" or self.restart_pending or missing:
            return
        self.restart_pending = True
        now = self.scheduler.now()
        delay = max(0.0, (self.restart_at or now) - now)
        attempt = self.attempt + 1  # (the restart and its back-off were said with the stop)
        self.scheduler.call_later(
            delay, lambda: self._start(attempt, self.restart_overrides(attempt))
        )

    def _start(self, attempt: int, overrides: Dict[str, Any]) -> None:
        if self.phase not in ("preparing", "restarting"):
            return
        self.restart_pending = False
        if self.phase == "restarting" and self._missing():
            return  # a node was lost during the back-off: its replacement restarts the job
        self.attempt = attempt
        self.phase = "running"
        self.done, self.ended = set(), set()
        self.failure = self.hang = None
        self.stacks = {}
        self.records.append(AttemptRecord(attempt, self.scheduler.now()))
        fields = self.replacing.start_fields()
        self.transport.broadcast({"t": "start", "attempt": attempt, **overrides, **fields})

    # -- replacement ----------------------------------------------------------------------

    def _missing(self) -> bool:
        """A lost node's replacement has not joined, or not prepared yet."""
        return bool(self.replacing.awaiting) or len(self.ready) < self.nnodes

    def _replace(self, failure: Dict[str, Any]) -> None:
        """A node is gone after the start: wait for its replacement, or end the job."""
        node = failure.get("node")
        assert isinstance(node, int)
        if self.phase == "restarting":  # the restart under way is counted already
            if self.policy.rejoin_timeout <= 0:
                self._over(failure, "--rejoin-timeout 0: a lost node is not replaced")
                return
        else:
            verdict = replacement(self.policy, self.attempt, node)
            if not verdict.restart:
                self._over(failure, verdict.reason, verdict.said)
                return
            record = self.records[-1]
            record.failure, record.decision, record.delay = failure, verdict.reason, 0.0
            self.failure, self.phase, self.ended = failure, "restarting", set()
            self.restart_at = self.scheduler.now()
        self.joined.discard(node)
        self.ready.discard(node)
        self.ended.add(node)  # its processes went with its launcher
        loss, timeout = self.replacing.lose(node), self.policy.rejoin_timeout
        if node == 0:
            self.phase = "over"  # this launcher is leaving: the others redial its replacement
        else:
            self.scheduler.call_later(timeout, lambda: self._rejoin_timed_out(node, loss))
        decision = self.records[-1].decision
        self.transport.broadcast(waiting_stop(self.attempt, failure, decision, timeout))

    def _rejoined(self, node: int, host: Optional[str]) -> None:
        loss = self.replacing.rejoined(node, host)
        if loss is None:
            return
        where = f" from {host}" if host else ""
        logger.info(f"node {node}'s replacement joined{where} after {loss.rejoin_seconds:.1f}s")
        # It prepares (stages in) like any node; the others say ready again and carry on.
        self.transport.broadcast({"t": "prepare", "attempt": self.attempt})

    def _rejoin_timed_out(self, node: int, loss: Loss) -> None:
        if self.phase == "restarting" and self.replacing.awaiting.get(node) is loss:
            failure, reason = never_came_back(node, self.policy.rejoin_timeout)
            self._over(failure, reason, f"no restart: {reason}")

    def _adopt(self, message: Message) -> None:
        """A survivor of a lost node 0 tells this (new) node 0 where the job was."""
        if self.phase in ("joining", "preparing"):
            self.attempt = max(self.attempt, self.replacing.adopt(message))

    def _resume_job(self) -> None:
        """Node 0 was replaced: go on from the adopted attempt, its restarts counted."""
        adopted = self.replacing.adopted
        assert adopted is not None
        self.attempt, failure = adopted.attempt, adopted.failure or lost_node(0)
        self.records.append(AttemptRecord(self.attempt, self.scheduler.now(), failure=failure))
        verdict = replacement(self.policy, self.attempt, 0)
        if not verdict.restart:
            self._over(failure, verdict.reason)
            return
        decision = f"{verdict.reason.split(':')[0]}: node 0 was replaced"
        self.records[-1].decision = decision
        logger.warning(f"node 0 replaced: the job goes on from attempt {self.attempt} ({decision})")
        self.replacing.losses.append(self.replacing.node_0_loss())
        self.phase = "restarting"
        self._start(self.attempt + 1, self.restart_overrides(self.attempt + 1))

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
        hang = hang_record(self.hang, self.stacks, self.nnodes)
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
