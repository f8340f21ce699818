"""One attempt's processes on this node: copy their output, notice their exits, stop them.

Mechanism only; the policy (who failed first, when to stop, what the node reports to the job)
is :mod:`malaunch.supervisor.attempt`'s. Output pipes are read in 64 KiB chunks straight into
the log files (and whole lines to the console); an exit, learnt from SIGCHLD through the
signal wakeup pipe, is recorded, its process group SIGKILLed (its own leftovers die with it)
and reported. :meth:`Group.stop` sends a signal to every running group and SIGKILL after the
grace period; the loop's timer, not a sleep, enforces it.

Once every process has exited and its group was killed, the pipes reach end-of-file at once;
only a process that left its group (setsid) can keep one open, and it is not waited for long.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from typing import Callable, List, Optional

from malaunch.events import EventLoop, Timer
from malaunch.log import logger
from malaunch.supervisor.output import describe
from malaunch.supervisor.reaper import Reaper
from malaunch.supervisor.runlog import RunLog
from malaunch.supervisor.spawn import Child

CHUNK = 1 << 16
MAX_READS_PER_EVENT = 16  # then serve the other ranks: one chatty rank must not starve them
DRAIN_TIMEOUT = 1.0


class Group:
    """The started processes of one attempt."""

    def __init__(
        self,
        loop: EventLoop,
        children: List[Child],
        reaper: Reaper,
        grace_period: float,
        *,
        on_exit: Callable[[Child], None],
        on_all_exited: Callable[[], None] = lambda: None,
        runlog: Optional[RunLog] = None,
    ) -> None:
        self.loop = loop
        self.children = children
        self.reaper = reaper
        self.grace_period = grace_period
        self.on_exit = on_exit
        self.on_all_exited = on_all_exited
        self.runlog = runlog
        self.kill_timer: Optional[Timer] = None
        self.drain_timer: Optional[Timer] = None
        self.drained = False
        self.log_failures = 0  # logs that could not be written (a full disk): said once
        for child in children:
            loop.add_reader(child.pipe_fd, functools.partial(self._read, child))

    def add(self, child: Child) -> None:
        """A process started again within the attempt (``simulate --replace-lost``)."""
        self.children.append(child)
        self.drained = False
        self.loop.add_reader(child.pipe_fd, functools.partial(self._read, child))

    # -- state ----------------------------------------------------------------------------

    @property
    def all_exited(self) -> bool:
        return not any(child.running for child in self.children)

    def running(self) -> List[Child]:
        return [child for child in self.children if child.running]

    def finished(self) -> bool:
        """Every process has exited and its output is in the log (or stopped coming)."""
        if not self.all_exited:
            return False
        return self.drained or all(child.pipe_fd < 0 for child in self.children)

    # -- events ---------------------------------------------------------------------------

    def reap(self) -> None:
        """Record every process that has exited (called on SIGCHLD)."""
        for child in self.children:
            if child.running:
                returncode = child.proc.poll()
                if returncode is not None:
                    self._exited(child, returncode)

    def _exited(self, child: Child, returncode: int) -> None:
        clock = self.loop.clock
        child.returncode = returncode
        child.end_wall, child.end_mono = clock.wall(), clock.now()
        if child.pipe_fd >= 0:
            self._read(child)  # what it wrote before dying, so its log is whole from now on
        # Its own leftover children die with it; the group id is then free for reuse.
        _killpg(child.pid, signal.SIGKILL)
        self.reaper.forget(child.pid)
        self.on_exit(child)
        if self.all_exited:
            self.on_all_exited()  # escaped descendants go now, so their pipes close
        self._drain_if_needed()

    def _read(self, child: Child) -> None:
        child.last_activity = self.loop.now()
        child.heard_from = True
        for _ in range(MAX_READS_PER_EVENT):
            try:
                data = os.read(child.pipe_fd, CHUNK)
            except BlockingIOError:
                return
            if not data:
                self._end_of_output(child)
                return
            if self.runlog is not None:
                self.runlog.chunk(child, child.log_offset, self.loop.clock.wall())
            child.log_offset += len(data)
            self._write_log(child, data)
            if child.relay is not None:
                child.relay.feed(data)
            if len(data) < CHUNK:
                return

    # -- actions --------------------------------------------------------------------------

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Signal every running process group; SIGKILL what is left after the grace period."""
        self.signal_running(signum)
        if self.grace_period <= 0:
            self.signal_running(signal.SIGKILL)
        elif self.kill_timer is None:
            self.kill_timer = self.loop.call_later(self.grace_period, self._kill_stragglers)

    def kill(self) -> None:
        self.signal_running(signal.SIGKILL)

    def signal_running(self, signum: int) -> None:
        for child in self.children:
            if child.running:
                _killpg(child.pid, signum)

    def _kill_stragglers(self) -> None:
        running = [describe(child.spec) for child in self.running()]
        if running:
            logger.warning(
                f"still running {self.grace_period:g}s after SIGTERM, sending SIGKILL: "
                + ", ".join(running)
            )
            self.kill()

    # -- output ---------------------------------------------------------------------------

    def _drain_if_needed(self) -> None:
        if self.all_exited and self.drain_timer is None and not self.finished():
            self.drain_timer = self.loop.call_later(DRAIN_TIMEOUT, self._drain_over)

    def _drain_over(self) -> None:
        self.drained = True

    def _end_of_output(self, child: Child) -> None:
        if child.relay is not None:
            child.relay.flush()
        self.loop.remove_reader(child.pipe_fd)
        os.close(child.pipe_fd)
        child.pipe_fd = -1
        if child.log_fd >= 0:
            os.close(child.log_fd)
            child.log_fd = -1

    def close(self) -> None:
        """Close what is left: pipes held open by a process that left its group, timers."""
        for timer in (self.kill_timer, self.drain_timer):
            if timer is not None:
                timer.cancel()
        for child in self.children:
            if child.pipe_fd >= 0:
                logger.warning(
                    f"output of {describe(child.spec)} is still held open by a process that "
                    "left its process group; closing the log without it"
                )
                self._read(child)
            if child.pipe_fd >= 0:
                self._end_of_output(child)

    def _write_log(self, child: Child, data: bytes) -> None:
        view = memoryview(data)
        while view and child.log_fd >= 0:
            try:
                view = view[os.write(child.log_fd, view) :]
            except OSError as exc:  # disk full: keep the job running, say so once
                self.log_failures += 1
                if self.log_failures == 1:
                    logger.error(
                        f"cannot write the log of {describe(child.spec)}: {exc} (the logs of "
                        "other processes that fail alike are not named again)"
                    )
                else:
                    logger.debug(f"cannot write the log of {describe(child.spec)} either: {exc}")
                os.close(child.log_fd)
                child.log_fd = -1


def _killpg(pgid: int, signum: int) -> None:
    # ESRCH: the group is already gone; EPERM: only zombies are left in it.
    with contextlib.suppress(OSError):
        os.killpg(pgid, signum)
