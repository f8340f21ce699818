"""The event loop of one launch attempt: copy output, watch exits and signals, fail fast.

One ``select`` waits on every output pipe and on the signal wakeup pipe (which also carries
SIGCHLD), with a timeout only while a deadline is pending (the SIGKILL after ``--grace-period``,
the final drain), so an idle launcher sleeps in the kernel. Rules (torch ``PContext``, SPEC §6):

- the first process, worker or service (ps, scheduler), that exits non-zero or dies of a
  signal is the first failure: every other process group gets SIGTERM at once and SIGKILL after
  the grace period. A service that exits 0 on its own is simply done: a MindSpore scheduler
  does so once every worker has unregistered, which can be before the launcher has seen the
  workers' own exits;
- when every worker has succeeded, the services get the same stop and the attempt succeeds;
- a terminating launcher signal is forwarded to every group (then SIGKILL after the grace
  period); a second one sends SIGKILL at once; other configured signals are only forwarded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import selectors
import signal
from typing import List, Optional

from malaunch.errors import ExitCode, LaunchError
from malaunch.log import logger
from malaunch.supervisor.clock import Clock
from malaunch.supervisor.output import describe
from malaunch.supervisor.reaper import Reaper
from malaunch.supervisor.signals import TERMINATING, SignalWakeup
from malaunch.supervisor.spawn import Child

CHUNK = 1 << 16
MAX_READS_PER_EVENT = 16  # then serve the other ranks: one chatty rank must not starve them
# Once every process has exited and its group was killed, pipes reach end-of-file at once;
# only a process that left its group (setsid) can keep one open, and it is not waited for long.
DRAIN_TIMEOUT = 1.0


def signal_name(signum: int) -> str:
    """``SIGTERM`` for 15; a bare number for signals Python does not name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def how_it_ended(returncode: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL``."""
    if returncode < 0:
        return f"was killed by {signal_name(-returncode)}"
    return f"exited with code {returncode}"


@dataclasses.dataclass
class Outcome:
    """How an attempt ended: every process, the first failure, the launcher's own signal."""

    children: List[Child]
    first_failure: Optional[Child]
    launcher_signal: Optional[int]
    launch_error: Optional[LaunchError] = None  # a process could not be started

    @property
    def exit_code(self) -> int:
        """SPEC §3: 71 if a process could not be started, else the first failure's code (128+N
        for signal N), else 128+N for the launcher's signal N, else 0."""
        if self.launch_error is not None:
            return int(self.launch_error.exit_code)
        if self.first_failure is not None:
            code = self.first_failure.returncode or 0
            return ExitCode.for_signal(-code) if code < 0 else code
        if self.launcher_signal is not None:
            return ExitCode.for_signal(self.launcher_signal)
        return 0


class Supervision:
    """Runs one attempt's processes to the end; the clock is injectable for tests."""

    def __init__(
        self,
        children: List[Child],
        wakeup: SignalWakeup,
        reaper: Reaper,
        grace_period: float,
        clock: Clock,
    ) -> None:
        self.children = children
        self.wakeup = wakeup
        self.reaper = reaper
        self.grace_period = grace_period
        self.clock = clock
        self.first_failure: Optional[Child] = None
        self.launcher_signal: Optional[int] = None
        self.launcher_signals = 0
        self.stopping = False
        self.kill_at: Optional[float] = None
        self.drain_until: Optional[float] = None
        self.selector = selectors.DefaultSelector()
        self.selector.register(wakeup.read_fd, selectors.EVENT_READ, None)
        for child in children:
            self.selector.register(child.pipe_fd, selectors.EVENT_READ, child)

    def run(self) -> Outcome:
        """Wait until every process has exited and its output is in the log file."""
        self._reap()
        try:
            while not self._finished():
                for key, _ in self.selector.select(self.clock.block_for(self._timeout())):
                    if key.data is None:
                        self._on_signals()
                    else:
                        self._read(key.data)
                self._on_deadlines()
        finally:
            self._close()
        return Outcome(self.children, self.first_failure, self.launcher_signal)

    def abort(self, error: LaunchError) -> Outcome:
        """Stop what has started: a later process of the plan could not be started."""
        self._stop(signal.SIGTERM)
        outcome = self.run()
        outcome.launch_error = error
        return outcome

    # -- events -------------------------------------------------------------------------

    def _on_signals(self) -> None:
        child_exited = False
        for signum in self.wakeup.read():
            if signum == signal.SIGCHLD:
                child_exited = True
            elif signum in TERMINATING:
                self._on_launcher_signal(signum)
            else:
                logger.info(f"forwarding {signal_name(signum)} to every process group")
                self._signal_running(signum)
        if child_exited:
            self._reap()

    def _on_launcher_signal(self, signum: int) -> None:
        self.launcher_signals += 1
        running = sum(child.running for child in self.children)
        if self.launcher_signals > 1:
            logger.warning(f"second signal ({signal_name(signum)}): killing {running} processes")
            self._signal_running(signal.SIGKILL)
            return
        if self.first_failure is None:
            self.launcher_signal = signum
        logger.warning(f"received {signal_name(signum)}: stopping {running} processes")
        self._stop(signum)

    def _reap(self) -> None:
        for child in self.children:
            if child.running:
                returncode = child.proc.poll()
                if returncode is not None:
                    self._on_exit(child, returncode)

    def _on_exit(self, child: Child, returncode: int) -> None:
        child.returncode = returncode
        child.end_wall, child.end_mono = self.clock.wall(), self.clock.now()
        # Its own leftover children die with it; the group id is then free for reuse.
        _killpg(child.pid, signal.SIGKILL)
        self.reaper.forget(child.pid)
        if self.stopping:
            return
        if returncode != 0:
            self.first_failure = child
            others = sum(other.running for other in self.children)
            stopping = f"; stopping {others} other processes" if others else ""
            logger.error(
                f"{describe(child.spec)} (pid {child.pid}) {how_it_ended(returncode)}" + stopping
            )
            self._stop(signal.SIGTERM)
        elif not any(c.running for c in self.children if not c.spec.service):
            services = sum(c.running for c in self.children)
            if services:
                logger.info(f"every worker succeeded; stopping {services} service processes")
            self._stop(signal.SIGTERM)

    def _read(self, child: Child) -> None:
        for _ in range(MAX_READS_PER_EVENT):
            try:
                data = os.read(child.pipe_fd, CHUNK)
            except BlockingIOError:
                return
            if not data:
                self._end_of_output(child)
                return
            _write_log(child, data)
            if child.relay is not None:
                child.relay.feed(data)
            if len(data) < CHUNK:
                return

    def _on_deadlines(self) -> None:
        if self.kill_at is not None and self.clock.now() >= self.kill_at:
            self.kill_at = None
            running = [describe(c.spec) for c in self.children if c.running]
            if running:
                logger.warning(
                    f"still running {self.grace_period:g}s after SIGTERM, sending SIGKILL: "
                    + ", ".join(running)
                )
                self._signal_running(signal.SIGKILL)

    # -- actions and state ----------------------------------------------------------------

    def _stop(self, signum: int) -> None:
        self.stopping = True
        self._signal_running(signum)
        if self.grace_period <= 0:
            self._signal_running(signal.SIGKILL)
        elif self.kill_at is None:
            self.kill_at = self.clock.now() + self.grace_period

    def _signal_running(self, signum: int) -> None:
        for child in self.children:
            if child.running:
                _killpg(child.pid, signum)

    def _finished(self) -> bool:
        if any(child.running for child in self.children):
            return False
        if all(child.pipe_fd < 0 for child in self.children):
            return True
        if self.drain_until is None:
            self.drain_until = self.clock.now() + DRAIN_TIMEOUT
        return self.clock.now() >= self.drain_until

    def _timeout(self) -> Optional[float]:
        deadlines = [d for d in (self.kill_at, self.drain_until) if d is not None]
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - self.clock.now())

    def _end_of_output(self, child: Child) -> None:
        if child.relay is not None:
            child.relay.flush()
        self.selector.unregister(child.pipe_fd)
        os.close(child.pipe_fd)
        child.pipe_fd = -1
        if child.log_fd >= 0:
            os.close(child.log_fd)
            child.log_fd = -1

    def _close(self) -> None:
        for child in self.children:
            if child.pipe_fd >= 0:
                logger.warning(
                    f"output of {describe(child.spec)} is still held open by a process that "
                    "left its process group; closing the log without it"
                )
                self._read(child)
            if child.pipe_fd >= 0:
                self._end_of_output(child)
        self.selector.close()


def _killpg(pgid: int, signum: int) -> None:
    # ESRCH: the group is already gone; EPERM: only zombies are left in it.
    with contextlib.suppress(OSError):
        os.killpg(pgid, signum)


def _write_log(child: Child, data: bytes) -> None:
    view = memoryview(data)
    while view and child.log_fd >= 0:
        try:
            view = view[os.write(child.log_fd, view) :]
        except OSError as exc:  # disk full: keep the job running, say so once
            logger.error(f"cannot write the log of {describe(child.spec)}: {exc}")
            os.close(child.log_fd)
            child.log_fd = -1
