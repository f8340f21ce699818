"""A node's link to the job's decisions: the in-process coordinator, node 0's channel server,
or the other nodes' client.

On a one-node job and on node 0 the :class:`~malaunch.job.coordinator.Coordinator` runs here:
its commands reach this node on the next loop round, never re-entrantly, and node 0 also serves
the job channel. Other nodes join node 0 first, then hear its commands through the client.
Whichever it is, the node sees two calls: :meth:`JobLink.report` to tell the job, and the
``on_command`` callback the job calls back.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

from malaunch.events import EventLoop
from malaunch.job.client import ChannelClient
from malaunch.job.coordinator import Coordinator
from malaunch.job.protocol import Message
from malaunch.job.server import ChannelServer
from malaunch.models import Topology
from malaunch.net import free_port
from malaunch.progress import LIVE_EVERY, Waiting
from malaunch.supervisor.options import SuperviseOptions


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

    def _heard(self, message: Message) -> None:
        """A command from node 0 (other nodes): note the attempt it starts, pass it on."""
        number = message.get("attempt")
        if message.get("t") == "start" and isinstance(number, int):
            self.heard_attempt = number
        kind = message.get("t")
        if self.client is not None and (
            kind == "finish" or (kind == "stop" and message.get("final", True))
        ):
            self.client.job_over = True  # node 0 may now leave before this node has stopped
        self.on_command(message)

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
        if coordinator.phase not in ("joining", "preparing"):
            waiting.done()
            return
        if coordinator.phase == "joining":
            missing = ", ".join(str(node) for node in coordinator.missing())
            waiting.update(f"not yet: node {missing}", settings.wait_timeout)
        elif 0 in coordinator.ready:  # while node 0 stages in, its own line says so
            unready = sorted(set(range(coordinator.nnodes)) - coordinator.ready)
            waiting.update(f"not ready yet: node {', '.join(map(str, unready))}")
        self.loop.call_later(LIVE_EVERY, self._join_progress)

    def close(self) -> None:
        if self.waiting is not None:
            self.waiting.done()  # the job may end (a signal, the timeout) while waiting
        if self.client is not None:
            self.client.close()
        if self.server is not None:
            self.server.close()
