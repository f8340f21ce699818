"""Before the start (malaunch.supervisor.prestart): node 0 listens early, and a failure is told
to the job over a real channel on loopback."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Dict, List, Tuple

import pytest

from malaunch.errors import ExitCode, LaunchError, UsageError
from malaunch.events import Clock, EventLoop
from malaunch.job.server import ChannelServer
from malaunch.job.settings import JobSettings
from malaunch.job.sockets import listen
from malaunch.net import free_port
from malaunch.supervisor import prestart

TOKEN = b"t" * 32


def settings(node: int, port: int, wait: float = 30.0) -> JobSettings:
    return JobSettings(node, 2, "127.0.0.1", port, TOKEN, wait_timeout=wait)


def test_node_0_listens_before_anything_else_and_hands_the_socket_over() -> None:
    channel = prestart.EarlyChannel(settings(0, 0))  # port 0: one the kernel picks
    assert channel.listener is not None
    port = channel.listener.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass  # the backlog takes it: nodes can connect while node 0 plans
    listener = channel.adopt()
    assert listener is not None and channel.listener is None and channel.adopted
    listener.close()
    assert prestart.EarlyChannel(settings(1, port)).listener is None  # others dial, later


def test_a_job_port_in_use_is_a_launch_error_naming_the_option() -> None:
    with socket.create_server(("", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(LaunchError) as info:
            prestart.EarlyChannel(settings(0, port))
    assert str(info.value).startswith(f"job port {port}: cannot listen on it (")
    assert str(info.value).endswith("); pick another with --job-port or MALAUNCH_JOB_PORT")


@pytest.mark.parametrize(
    ("error", "code", "reason"),
    [
        (UsageError("--x: no"), ExitCode.USAGE, "--x: no"),
        (KeyError("k"), ExitCode.SOFTWARE, "internal error (KeyError: 'k')"),
    ],
)
def test_the_failure_told(error: Exception, code: int, reason: str) -> None:
    failure = prestart.prestart_failure(error, 3)
    assert failure == {"kind": "prestart", "node": 3, "rank": None, "code": code, "reason": reason}


def test_another_node_says_why_in_its_hello_before_node_0_counts_its_join() -> None:
    listener = listen(0)
    port = listener.getsockname()[1]
    events: List[Tuple[Any, ...]] = []
    loop = EventLoop(Clock())

    def report(node: int, message: Dict[str, Any]) -> None:
        events.append(("report", node, message))
        server.send(node, {"t": "stop", "final": True})  # node 1 leaves once answered

    server = ChannelServer(
        loop,
        settings(0, port),
        on_join=lambda node, host: events.append(("join", node)),
        on_report=report,
        on_lost=lambda node: events.append(("lost", node)),
        listener=listener,
    )
    failure: Dict[str, Any] = {"kind": "prestart", "node": 1, "code": 64, "reason": "no"}
    teller = threading.Thread(target=prestart.tell_node_0, args=(settings(1, port), failure))
    teller.start()
    deadline = time.monotonic() + 30
    while teller.is_alive() and time.monotonic() < deadline:
        loop.run_once()
    teller.join(timeout=30)
    server.close()
    loop.close()
    # Reported first: node 0 ends the job before the "prepare" a join of every node brings.
    assert events == [
        ("report", 1, {"t": "failed", "attempt": -1, "failure": failure}),
        ("join", 1),
    ]


def test_a_failure_after_the_handover_is_not_told_again() -> None:
    channel = prestart.EarlyChannel(settings(1, free_port(), wait=0.1))
    with pytest.raises(UsageError), prestart.failures_told(channel):
        channel.adopt()  # the running node tells the job itself from here
        raise UsageError("later")
    assert channel.adopted


def test_a_node_0_that_never_comes_is_said_and_the_error_stays(
    messages: List[str],
) -> None:
    channel = prestart.EarlyChannel(settings(1, free_port(), wait=0.2))
    with pytest.raises(UsageError, match=r"^mine$"), prestart.failures_told(channel):
        raise UsageError("mine")
    assert messages[-1].startswith(
        "could not tell node 0 why this node cannot start: node 0's launcher at 127.0.0.1:"
    )
