"""The launcher's one event loop: readable and writable file descriptors, outputs and timers.

Everything the launcher waits for arrives here: worker output pipes, the signal wakeup pipe
(signals and SIGCHLD), the job channel's sockets and the heartbeat socket, plus timers (the
SIGKILL after the grace period, heartbeats to peers, hang checks, restart back-off). One
``select`` waits for all of them with a timeout only when a timer is pending, so an idle
launcher sleeps in the kernel. The same ``select`` waits for the console to take more
(:meth:`EventLoop.add_output`): the loop never blocks in a write, so a stalled console reader
cannot stop heartbeats, hang checks or the job channel; node 0's job channel likewise waits
for a slow node's socket to take more (:meth:`EventLoop.add_writer`) instead of blocking in a
send. Callbacks run one at a time in the
main thread; there is no locking anywhere (outputs that threads write to lock themselves).

Time comes from an injected :class:`Clock`, which also decides how long a wait may really
block: :meth:`Clock.block_for` turns "my next deadline is T seconds away" into how long the
kernel wait may last. The real clock returns T unchanged; a test's virtual clock jumps its own
time forward by T and returns 0, so a one-hour grace period passes at once while real events
(output, exits, signals) still arrive through the same ``select``.
"""

from __future__ import annotations

import heapq
import itertools
import selectors
import time
from typing import Callable, Dict, List, Optional, Protocol, Tuple


class Clock:
    """The real clock: ``time.monotonic`` for deadlines, ``time.time`` for the summary."""

    def now(self) -> float:
        """Monotonic seconds: what deadlines and durations are measured in."""
        return time.monotonic()

    def wall(self) -> float:
        """Seconds since the epoch: what start and end times are reported in."""
        return time.time()

    def block_for(self, timeout: Optional[float]) -> Optional[float]:
        """How long the loop may block for a deadline ``timeout`` seconds away (None: none)."""
        return timeout


Callback = Callable[[], None]


class Output(Protocol):
    """Something written without blocking, with data that may wait for its reader
    (:class:`malaunch.console.ConsoleStream`)."""

    def write_fd(self) -> Optional[int]:
        """The descriptor to wait on while data waits (None: nothing waits)."""

    def on_writable(self) -> None:
        """The descriptor takes more: write what waits."""


class Timer:
    """A pending :meth:`EventLoop.call_at`; :meth:`cancel` makes it never fire."""

    def __init__(self, when: float, callback: Callback) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class EventLoop:
    """Readers and timers over one selector."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.selector = selectors.DefaultSelector()
        self._readers: Dict[int, Callback] = {}
        self._outputs: List[Output] = []
        self._writers: Dict[int, Output] = {}  # descriptors now waited on for writing
        self._write_waiters: Dict[int, Callback] = {}  # add_writer's
        self._timers: List[Tuple[float, int, Timer]] = []
        self._order = itertools.count()  # ties fire in the order they were set

    def add_reader(self, fd: int, callback: Callback) -> None:
        """Call ``callback`` whenever ``fd`` is readable (or at end of file)."""
        self._readers[fd] = callback
        self._update(fd)

    def remove_reader(self, fd: int) -> None:
        if self._readers.pop(fd, None) is not None:
            self._update(fd)

    def add_writer(self, fd: int, callback: Callback) -> None:
        """Call ``callback`` whenever ``fd`` can take more (until :meth:`remove_writer`): for a
        socket whose data waits in a buffer of its own, so that a slow peer never blocks the
        loop in a send."""
        self._write_waiters[fd] = callback
        self._update(fd)

    def remove_writer(self, fd: int) -> None:
        if self._write_waiters.pop(fd, None) is not None:
            self._update(fd)

    def add_output(self, output: Output) -> None:
        """Flush ``output`` whenever it has data waiting and its descriptor is writable.

        Before each wait the loop asks every output for :meth:`Output.write_fd`, so data that
        a thread beside the loop queued is waited for from the next round on."""
        if all(output is not known for known in self._outputs):
            self._outputs.append(output)

    def remove_output(self, output: Output) -> None:
        self._outputs = [known for known in self._outputs if known is not output]
        for fd in [fd for fd, known in self._writers.items() if known is output]:
            del self._writers[fd]
            self._update(fd)

    def _watch_outputs(self) -> None:
        wanted: Dict[int, Output] = {}
        for output in self._outputs:
            fd = output.write_fd()
            if fd is not None:
                wanted[fd] = output
        if wanted == self._writers:
            return
        changed = set(wanted) ^ set(self._writers)
        self._writers = wanted
        for fd in changed:
            self._update(fd)

    def _update(self, fd: int) -> None:
        """Register ``fd`` for what it is now waited on for (reading, writing, both, none)."""
        writing = fd in self._writers or fd in self._write_waiters
        events = (selectors.EVENT_READ if fd in self._readers else 0) | (
            selectors.EVENT_WRITE if writing else 0
        )
        try:
            registered = self.selector.get_key(fd).events
        except KeyError:
            registered = 0
        if events == registered:
            return
        if not events:
            self.selector.unregister(fd)
        elif not registered:
            self.selector.register(fd, events, fd)
        else:
            self.selector.modify(fd, events, fd)

    def call_at(self, when: float, callback: Callback) -> Timer:
        """Call ``callback`` once the clock reaches ``when`` (monotonic seconds)."""
        timer = Timer(when, callback)
        heapq.heappush(self._timers, (when, next(self._order), timer))
        return timer

    def call_later(self, delay: float, callback: Callback) -> Timer:
        return self.call_at(self.clock.now() + delay, callback)

    def now(self) -> float:
        return self.clock.now()

    def run_until(self, done: Callable[[], bool]) -> None:
        """Dispatch events and timers until ``done()`` is true (checked after each round)."""
        while not done():
            self.run_once()

    def run_once(self) -> None:
        """Wait for the next event or timer and dispatch what is ready."""
        self._watch_outputs()
        timeout = self._next_timeout()
        self._dispatch(self.selector.select(self.clock.block_for(timeout)))
        if self._timers and self._timers[0][0] <= self.clock.now():
            # Events before timers, always: a launcher stopped (SIGSTOP: a debugger, a paused
            # container, a frozen VM) in its wait or in a callback comes back with its timers
            # due and the output and heartbeats of the stop unread (Python even gives up an
            # interrupted epoll_wait past its deadline without looking at what is ready).
            # Read them, so that no timer takes the launcher's own absence for a hung rank.
            self._dispatch(self.selector.select(0))
        self._fire_due()

    def _dispatch(self, ready: List[Tuple[selectors.SelectorKey, int]]) -> None:
        for key, events in ready:
            # An earlier callback of this round may have removed what was ready.
            if events & selectors.EVENT_WRITE:
                output = self._writers.get(key.data)
                if output is not None:
                    output.on_writable()
                waiter = self._write_waiters.get(key.data)
                if waiter is not None:
                    waiter()
            callback = self._readers.get(key.data) if events & selectors.EVENT_READ else None
            if callback is not None:
                callback()

    def _next_timeout(self) -> Optional[float]:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        if not self._timers:
            return None
        return max(0.0, self._timers[0][0] - self.clock.now())

    def _fire_due(self) -> None:
        now = self.clock.now()
        while self._timers and self._timers[0][0] <= now:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.cancelled = True  # fired: a cancel() from the callback is harmless
                timer.callback()

    def close(self) -> None:
        self.selector.close()
        self._readers.clear()
        self._outputs.clear()
        self._writers.clear()
        self._write_waiters.clear()
        self._timers.clear()
