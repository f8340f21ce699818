"""A node's link to the job's decisions: the in-process coordinator, node 0's channel server,
or the other nodes' client.

On a one-node job and on node 0 the :class:`~malaunch.job.coordinator.Coordinator` runs here:
its commands reach this node on the next loop round, never re-entrantly, and node 0 also serves
the job channel. Other nodes join node 0 first, then hear its commands through the client.
Whichever it is, the node sees two calls: :meth:`JobLink.report` to tell the job, and the
``on_command`` callback the job calls back.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional

from malaunch.events import EventLoop
from malaunch.job.client import ChannelClient
from malaunch.job.coordinator import Coordinator
from malaunch.job.protocol import Message
from malaunch.job.replacement import lost_node, never_came_back, waiting_stop
from malaunch.job.restart import Decision, replacement
from malaunch.job.server import ChannelServer
from malaunch.models import Topology
from malaunch.net import free_port
from malaunch.progress import LIVE_EVERY, Waiting
from malaunch.supervisor.options import SuperviseOptions
from malaunch.wording import spans

SHOWN_NODES = 8  # nodes named one by one in the wait's line; past it, spans
MAX_SPANS_TEXT = 200  # characters of spans in that line


class JobLink:
    """How this node reports to the job and hears back from it."""

    def __init__(
        self,
        loop: EventLoop,
        options: SuperviseOptions,
        topology: Topology,
        node: int,
        on_command: Callable[[Message], None],
    ) -> None:
        self.loop = loop
        self.options = options
        self.topology = topology
        self.node = node
        self.on_command = on_command
        self.heard_attempt = -1  # the last "start" node 0 sent (the other nodes' view)
        self.coordinator: Optional[Coordinator] = None
        self.server: Optional[ChannelServer] = None
        self.client: Optional[ChannelClient] = None
        self.waiting: Optional[Waiting] = None
        self.waiting_for_ready = False  # node 0's wait: for the joins, then for the stage-ins
        self.on_lost: Callable[[str], None] = lambda reason: None
        self.heard_failure: Optional[Dict[str, Any]] = None  # of the attempt that ended
        self.lost_node_0: Optional[Dict[str, Any]] = None  # the failure, while redialling
        self.rejoin_since: Optional[float] = None  # node 0 lost: its replacement is awaited

    @property
    def attempt(self) -> int:
        """The attempt the job is at, as far as this node knows (-1 before the start): a
        report between two attempts (a signal during a restart's back-off) must carry it, or
        node 0 takes it for a late one and ignores it."""
        if self.coordinator is not None:
            return self.coordinator.attempt
        return self.heard_attempt

    def connect(self, on_lost: Callable[[str], None], interrupted: Callable[[], bool]) -> None:
        """Join node 0 (other nodes), or set up the coordinator (node 0, one-node jobs)."""
        settings = self.options.job
        self.on_lost = on_lost
        # From now on this node tells the job itself (before, malaunch.supervisor.prestart did).
        listener = self.options.channel.adopt() if self.options.channel is not None else None
        if settings is not None and not settings.serves:
            self.client = ChannelClient(self.loop, settings, self._heard, on_lost)
            self.client.join(interrupted)
            return
        self.coordinator = Coordinator(
            1 if settings is None else settings.nnodes,
            self.options.restart,
            transport=self,
            scheduler=self.loop,
            restart_overrides=self._restart_overrides,
            success=self.options.success_policy,
            # Without the channel, a node of a multi-node job decides for itself alone.
            partial=settings is None and self.topology.nnodes > 1,
        )
        if settings is not None:
            self.server = ChannelServer(
                self.loop,
                settings,
                on_join=self.coordinator.join,
                on_report=self.coordinator.report,
                on_lost=self.coordinator.lost,
                listener=listener,
            )
            self.loop.call_later(settings.wait_timeout, self.coordinator.join_timed_out)
            self.waiting = Waiting(
                f"node launchers to join the job channel on port {settings.port}",
                clock=self.loop.now,
            )
            self.loop.call_later(LIVE_EVERY, self._join_progress)
        self.coordinator.join(0)

    def broadcast(self, message: Message) -> None:
        """The coordinator's commands: to the other nodes now, to this node next round."""
        if self.server is not None:
            self.server.broadcast(message)
        self.loop.call_later(0, lambda: self.on_command(message))

    def tell(self, node: int, message: Message) -> None:
        """A command for one other node (a node that joins after the job ended)."""
        if self.server is not None:
            self.server.send(node, message)

    def _heard(self, message: Message) -> None:
        """A command from node 0 (other nodes): note the attempt it starts, pass it on."""
        number, kind, failure = message.get("attempt"), message.get("t"), message.get("failure")
        if kind in ("start", "prepare") and isinstance(number, int):
            # a replacement learns the attempt the job is at from its "prepare"
            self.heard_attempt = max(self.heard_attempt, number)
        if kind == "start":
            self.heard_failure = None
        elif kind == "stop" and isinstance(failure, dict):
            self.heard_failure = failure
        if self.client is not None and (
            kind == "finish" or (kind == "stop" and message.get("final", True))
        ):
            self.client.job_over = True  # node 0 may now leave before this node has stopped
        self.on_command(message)

    def lose_node_0(self, reason: str) -> Message:
        """Other nodes: node 0's launcher is gone. The ``stop`` this node obeys: final, or,
        while restarts remain, one that waits for node 0's replacement (:meth:`rejoin` then
        redials once the local processes are down)."""
        failure = {**lost_node(0), "reason": reason}
        decision = self.node_0_lost()
        if not decision.restart:
            return {"t": "stop", "final": True, "failure": failure}
        self.lost_node_0, self.rejoin_since = failure, self.loop.now()
        timeout = self.options.restart.rejoin_timeout
        return waiting_stop(self.heard_attempt, failure, decision.reason, timeout)

    def never_came_back(self) -> Message:
        """The final ``stop`` when node 0's replacement did not join in time."""
        failure, decision = never_came_back(0, self.options.restart.rejoin_timeout)
        return {"t": "stop", "final": True, "failure": failure, "decision": decision}

    def node_0_lost(self) -> Decision:
        """Other nodes: wait for node 0's replacement, or stop (the same rule as node 0's
        coordinator applies to the other nodes, on the attempt this node heard last)."""
        if self.heard_attempt < 0:
            return Decision(False, 0.0, "node 0 was lost before the job started")
        return replacement(self.options.restart, self.heard_attempt, 0)

    def rejoin(self, interrupted: Callable[[], bool]) -> None:
        """Redial node 0 (its name resolved anew each try) until ``--rejoin-timeout``, and
        tell the new node 0 where the job was: the attempt, its first failure, the wait.
        Authentication stays mutual: a program that took the port proves nothing, learns
        nothing. :raises PeerError: no replacement in time."""
        assert self.options.job is not None and self.rejoin_since is not None
        since, self.rejoin_since = self.rejoin_since, None
        timeout = self.options.restart.rejoin_timeout
        settings = dataclasses.replace(self.options.job, wait_timeout=timeout)
        where = f"{settings.host}:{settings.port}"
        if self.client is not None:
            self.client.close()
        self.client = ChannelClient(self.loop, settings, self._heard, self.on_lost)
        self.client.join(interrupted, what=f"node 0's replacement at {where} (job channel)")
        if self.client.sock is not None:
            waited = round(self.loop.now() - since, 3)
            failure = self.heard_failure or self.lost_node_0
            resume = {"t": "resume", "attempt": self.heard_attempt, "failure": failure}
            self.client.send({**resume, "waited": waited})

    def report(self, message: Message) -> None:
        """Tell the job (node 0's coordinator, wherever it runs)."""
        if self.client is not None:
            self.client.send(message)
        elif self.coordinator is not None:
            coordinator = self.coordinator
            self.loop.call_later(0, lambda: coordinator.report(self.node, message))

    def _restart_overrides(self, attempt: int) -> Dict[str, object]:
        """A fresh rendezvous port for the next attempt, when this node hosts the rendezvous:
        a straggler of the last attempt can then never meet the new one."""
        del attempt
        topology = self.topology
        if topology.master_port is None or topology.master_addr != topology.nodes[0].host:
            return {}
        return {"master_port": free_port("0.0.0.0")}

    def _join_progress(self) -> None:
        """Node 0's wait for the others to join, then to stage in, shown like every wait
        (malaunch.progress): a live line on a terminal, a line every 10 s in a log, nothing if
        it ends within 2 s."""
        coordinator, settings, waiting = self.coordinator, self.options.job, self.waiting
        if coordinator is None or settings is None or waiting is None:
            return
        if coordinator.phase == "preparing" and not self.waiting_for_ready:
            # Joined: now the others' stage-in, with no deadline (staging has its own).
            waiting.done()
            waiting = self.waiting = Waiting("the other nodes to stage in", clock=self.loop.now)
            self.waiting_for_ready = True
        if coordinator.phase not in ("joining", "preparing", "telling"):
            waiting.done()
            return
        if coordinator.phase in ("joining", "telling"):  # telling: why the job ends
            waiting.update(f"not yet: {_nodes(coordinator.missing())}", settings.wait_timeout)
        elif 0 in coordinator.ready:  # while node 0 stages in, its own line says so
            unready = sorted(set(range(coordinator.nnodes)) - coordinator.ready)
            waiting.update(f"not ready yet: {_nodes(unready)}")
        self.loop.call_later(LIVE_EVERY, self._join_progress)

    def may_leave(self) -> bool:
        """Node 0 stays while the job, ended before its start, tells the nodes that join."""
        return self.coordinator is None or self.coordinator.phase != "telling"

    def leave(self) -> None:
        """Node 0 was signalled: it tells no more nodes, it leaves."""
        if self.coordinator is not None:
            self.coordinator.stop_telling()

    def close(self) -> None:
        if self.waiting is not None:
            self.waiting.done()  # the job may end (a signal, the timeout) while waiting
        if self.client is not None:
            self.client.close()
        if self.server is not None:
            self.server.close()


def _nodes(nodes: List[int]) -> str:
    """``node 1, 2``; past a few, a count and the spans, cut short: a line every 10 s while
    thousands of nodes join must stay a line (``9,998 nodes: 1-4211,4213-9999``)."""
    if len(nodes) <= SHOWN_NODES:
        return f"node {', '.join(map(str, nodes))}"
    folded = spans(nodes)
    if len(folded) > MAX_SPANS_TEXT:
        cut = folded.rfind(",", 0, MAX_SPANS_TEXT)  # > 0: no span is 200 characters long
        folded = folded[:cut] + ",..."
    return f"{len(nodes):,} nodes: {folded}"
