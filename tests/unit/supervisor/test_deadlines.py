"""Deadlines on a virtual clock: the grace period, escalation and the drain, without waiting.

The loop blocks in ``select`` until an event or its next deadline, and asks its clock how long
that may really take. A virtual clock jumps its own time to the deadline and answers 0, so a
one-hour grace period passes at once while exits and signals still arrive for real; a frozen
clock never reaches a deadline, so only an event can end the run.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import List, Optional

from jobs import Job, alive, wait_until

from malaunch.events import Clock
from malaunch.supervisor.group import DRAIN_TIMEOUT

HOUR = 3600.0


class VirtualClock(Clock):
    """Time that moves only when the loop waits for a deadline: it jumps straight there."""

    def __init__(self) -> None:
        self.time = 0.0
        self.jumps: List[float] = []

    def now(self) -> float:
        return self.time

    def wall(self) -> float:
        return 1_800_000_000.0 + self.time

    def block_for(self, timeout: Optional[float]) -> Optional[float]:
        if timeout is None:
            return None
        self.time += timeout
        if timeout > 0:  # zero: a callback queued for the next round, not a deadline
            self.jumps.append(timeout)
        return 0.0


class FrozenClock(Clock):
    """Time that never moves: no deadline is ever reached."""

    def now(self) -> float:
        return 0.0

    def wall(self) -> float:
        return 1_800_000_000.0

    def block_for(self, timeout: Optional[float]) -> Optional[float]:
        # What is due now still runs; a deadline in the future never comes.
        return 0.0 if timeout == 0 else None


def test_sigkill_comes_exactly_one_grace_period_after_sigterm(
    job: Job, messages: List[str]
) -> None:
    clock = VirtualClock()
    stubborn = job.spec(0, "--ignore-term", "--child", "--sleep", "600")
    failing = job.spec(1, "--wait-files", str(job.pid_dir / "rank0.pids"), "--exit", "2")
    assert job.run(job.plan(stubborn, failing), grace_period=HOUR, clock=clock) == 2
    summary = job.summary()
    assert summary["processes"][0]["signal"] == "SIGKILL"
    assert summary["first_failure"]["rank"] == 1
    # SIGTERM went out at virtual time 0; the one deadline the loop waited for was the hour.
    assert clock.jumps[0] == HOUR
    assert any("still running 3600s after SIGTERM, sending SIGKILL: rank 0" in m for m in messages)
    # The stubborn rank's end is recorded at the virtual hour, not before.
    end = summary["processes"][0]["end_time"]
    assert end is not None and clock.time >= HOUR
    job.assert_all_gone(expected_at_least=3)


def test_without_the_deadline_only_a_second_signal_kills(job: Job, messages: List[str]) -> None:
    specs = [job.spec(rank, "--sleep", "600", "--ignore-term", "--child") for rank in range(2)]

    def send() -> None:
        # The second signal goes out once the first was acted on: two signals sent back to
        # back may reach the launcher as one (the kernel keeps one pending signal per number).
        job.wait_started(2)
        os.kill(os.getpid(), signal.SIGTERM)
        wait_until(lambda: any("received SIGTERM" in m for m in messages), "the first signal")
        os.kill(os.getpid(), signal.SIGTERM)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    code = job.run(job.plan(*specs), grace_period=HOUR, clock=FrozenClock())
    sender.join()
    assert code == 128 + signal.SIGTERM
    assert {p["signal"] for p in job.summary()["processes"]} == {"SIGKILL"}
    assert any("second signal (SIGTERM): killing 2 processes" in m for m in messages)
    assert not any("sending SIGKILL" in m for m in messages)  # not the grace-period path
    job.assert_all_gone(expected_at_least=4)


def test_output_held_by_a_process_that_left_the_group_is_drained_then_closed(
    job: Job, messages: List[str]
) -> None:
    clock = VirtualClock()
    spec = job.spec(0, "--setsid-child", "--lines", "3")
    try:
        # Without containment the escaped grandchild lives on (with it, it would be killed).
        assert job.run(job.plan(spec), clock=clock, containment=False) == 0
        # Only the drain deadline was waited for, and in virtual time.
        assert clock.jumps == [DRAIN_TIMEOUT]
        assert any(
            "still held open by a process that left its process group" in m for m in messages
        )
        assert job.log(spec).splitlines() == [b"rank0 line 0", b"rank0 line 1", b"rank0 line 2"]
    finally:
        escaped = [pid for pid in job.pids() if alive(pid)]
        for pid in escaped:
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not any(alive(pid) for pid in escaped), "the setsid grandchild to go")
