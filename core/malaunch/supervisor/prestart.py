"""Before the start: the job channel from the moment this node knows its topology.

Node 0 binds the job port (:class:`EarlyChannel`) before it plans, sets up staging or checks
what needs the topology, so that whatever fails there can be told to the job instead of
leaving the other node launchers waiting for ``--wait-timeout``. Until the running node takes
the channel over (``JobLink.connect`` :meth:`~EarlyChannel.adopt`\\ s it), a failure is told by
:func:`failures_told`, and decided like every job-level event by the
:class:`~malaunch.job.coordinator.Coordinator`:

- **on node 0**, the coordinator hears node 0's failure before the start and ends the job: the
  nodes that connected meanwhile (waiting in the listen backlog) hear why as they are let in,
  later ones as they join, until every node has heard or ``--wait-timeout`` is over; then node
  0 exits with its own error;
- **on another node**, the launcher joins node 0 (within ``--wait-timeout``) with its failure
  in its hello, then exits with its own error; node 0 ends the job.

The nodes told exit 75 (stopped by another node), the failure and its reason in their summaries.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from typing import Any, Dict, Iterator, List, Optional

from malaunch.errors import ExitCode, LaunchError, MalaunchError, PeerError
from malaunch.events import Clock, EventLoop
from malaunch.job.client import ChannelClient
from malaunch.job.coordinator import Coordinator
from malaunch.job.protocol import Message
from malaunch.job.restart import RestartPolicy
from malaunch.job.server import ChannelServer
from malaunch.job.settings import JobSettings
from malaunch.job.sockets import listen
from malaunch.log import logger
from malaunch.progress import LIVE_EVERY, Waiting

PRESTART = "prestart"  # the failure's kind: describe_failure says "failed before the start"
MAX_REASON = 500  # characters of the error line a failure carries


class EarlyChannel:
    """The job channel before the start: node 0's bound listener (None on other nodes)."""

    def __init__(self, settings: Optional[JobSettings]) -> None:
        self.settings = settings
        self.listener: Optional[socket.socket] = None
        self.adopted = False
        if settings is not None and settings.serves:
            try:
                self.listener = listen(settings.port)
            except OSError as exc:
                msg = (
                    f"job port {settings.port}: cannot listen on it ({exc.strerror or exc}); "
                    "pick another with --job-port or MALAUNCH_JOB_PORT"
                )
                raise LaunchError(msg) from exc

    def adopt(self) -> Optional[socket.socket]:
        """The running node takes the channel over: from now on it tells the job itself.
        Returns node 0's listener (None on other nodes)."""
        self.adopted = True
        listener, self.listener = self.listener, None
        return listener

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None


@contextlib.contextmanager
def failures_told(channel: EarlyChannel) -> Iterator[EarlyChannel]:
    """Tell the job why this node cannot start, when the body fails before the running node
    took the channel over; the error then goes on as it was."""
    try:
        yield channel
    except Exception as exc:
        settings = channel.settings
        if settings is None or channel.adopted:
            raise
        failure = prestart_failure(exc, settings.node_rank)
        logger.warning(f"this node cannot start ({failure['reason']}): telling the job")
        if settings.serves:
            assert channel.listener is not None
            tell_every_node(settings, channel.adopt(), failure)
        else:
            channel.adopt()
            tell_node_0(settings, failure)
        raise
    finally:
        channel.close()


def prestart_failure(exc: BaseException, node: int) -> Dict[str, Any]:
    """How the job channel says that ``node`` failed before the start with ``exc``."""
    if isinstance(exc, MalaunchError):
        code, reason = int(exc.exit_code), str(exc)
    else:  # a bug: the node's own line says "internal error" too
        code, reason = int(ExitCode.SOFTWARE), f"internal error ({type(exc).__name__}: {exc})"
    return {
        "kind": PRESTART,
        "node": node,
        "rank": None,
        "code": code,
        "reason": reason[:MAX_REASON],
    }


class _Others:
    """The coordinator's transport here: node 0 runs nothing, so only the others hear."""

    def __init__(self) -> None:
        self.server: Optional[ChannelServer] = None

    def broadcast(self, message: Message) -> None:
        if self.server is not None:
            self.server.broadcast(message)

    def tell(self, node: int, message: Message) -> None:
        if self.server is not None:
            self.server.send(node, message)


def tell_every_node(
    settings: JobSettings, listener: Optional[socket.socket], failure: Dict[str, Any]
) -> None:
    """Node 0: serve the job channel until every node has heard why the job ends, or until
    ``--wait-timeout``."""
    loop = EventLoop(Clock())
    transport = _Others()
    coordinator = Coordinator(settings.nnodes, RestartPolicy(), transport=transport, scheduler=loop)
    server = ChannelServer(
        loop,
        settings,
        on_join=coordinator.join,
        on_report=coordinator.report,
        on_lost=coordinator.lost,
        listener=listener,
    )
    transport.server = server
    coordinator.join(0)
    coordinator.report(0, {"t": "failed", "attempt": -1, "failure": failure})
    loop.call_later(settings.wait_timeout, coordinator.join_timed_out)
    waiting = Waiting("the other node launchers to join, to tell them why the job ends")

    def progress() -> None:
        missing = ", ".join(str(node) for node in coordinator.missing())
        waiting.update(f"not yet: node {missing}", settings.wait_timeout)
        loop.call_later(LIVE_EVERY, progress)

    progress()
    try:
        with _leaving_on_signals():
            loop.run_until(lambda: coordinator.phase != "telling")
    except _Leave:
        logger.warning("signalled: the node launchers still to join go untold")
    finally:
        waiting.done()
        server.close()
        loop.close()


class _Leave(Exception):
    """SIGTERM or SIGINT while node 0 tells the others: it leaves with its own error."""


@contextlib.contextmanager
def _leaving_on_signals() -> Iterator[None]:
    def leave(signum: int, frame: object) -> None:
        raise _Leave

    before = {signum: signal.signal(signum, leave) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def tell_node_0(settings: JobSettings, failure: Dict[str, Any]) -> None:
    """Another node: join node 0 with the failure in the hello (node 0 ends the job), and
    leave once node 0 has answered with its stop (or after a heartbeat timeout). A node 0 that
    cannot be reached within ``--wait-timeout`` is said, not raised: the error this node exits
    with is its own."""
    loop = EventLoop(Clock())
    heard: List[Message] = []
    client = ChannelClient(loop, settings, heard.append, lambda reason: None)
    where = f"{settings.host}:{settings.port}"
    what = f"node 0's launcher at {where} (job channel), to tell it why this node cannot start"
    try:
        client.join(lambda: False, what=what, failure=failure)
        deadline = loop.now() + settings.heartbeat_timeout
        loop.call_at(deadline, lambda: None)  # wakes the loop for the deadline
        loop.run_until(lambda: bool(heard) or client.lost or loop.now() >= deadline)
    except PeerError as exc:
        logger.warning(f"could not tell node 0 why this node cannot start: {exc}")
    finally:
        client.close()
        loop.close()
