"""Silence per rank: ``--hang-timeout`` and ``--hang-startup-timeout``.

A worker is *hung* when it has written no output and sent no heartbeat for the hang timeout;
before its first sign of life (imports, rendezvous) the start-up timeout applies instead.
Services (parameter servers, schedulers) are quiet by design and are never watched. The
supervisor marks activity on the child as output is read and heartbeats arrive; this module
only keeps one timer, set for the earliest moment any worker could be hung, and looks again
when it fires. Detection comes at the timeout itself, not on a polling tick (ranks still
starting up are looked at once per timeout, in case they have spoken since).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, Optional, Protocol, Sequence

from malaunch.events import EventLoop, Timer
from malaunch.models import ProcessSpec

DEFAULT_STARTUP_TIMEOUT = 300.0
STACK_METHODS = ("auto", "py-spy", "faulthandler", "none")


@dataclasses.dataclass(frozen=True)
class HangSettings:
    """``timeout`` after the first sign of life, ``startup_timeout`` before it; ``stacks``:
    how to capture the ranks' stacks (``auto`` = py-spy where it works, else faulthandler)."""

    timeout: float
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    stacks: str = "auto"

    @property
    def beat_interval(self) -> float:
        """How often a rank's ``heartbeat()`` really sends: ten beats per timeout."""
        return max(0.05, self.timeout / 10)


class Watched(Protocol):
    """What the watch reads of a started process (the supervisor's ``Child``)."""

    spec: ProcessSpec
    last_activity: float  # monotonic time of its last output or heartbeat (or its start)
    heard_from: bool  # any output or heartbeat yet

    @property
    def running(self) -> bool: ...


class HangWatch:
    """Calls ``on_hang(child, seconds_silent)`` once, for the first worker silent too long."""

    def __init__(
        self,
        loop: EventLoop,
        settings: HangSettings,
        children: Sequence[Watched],
        on_hang: Callable[[Watched, float], None],
    ) -> None:
        self.loop = loop
        self.settings = settings
        self.children: List[Watched] = [c for c in children if not c.spec.service]
        self.on_hang = on_hang
        self.timer: Optional[Timer] = None
        self.stopped = False
        self._schedule()

    def _limit(self, child: Watched) -> float:
        return self.settings.timeout if child.heard_from else self.settings.startup_timeout

    def _schedule(self) -> None:
        # A rank still in its start-up phase may speak at any moment and then be held to the
        # shorter timeout, which nobody tells this watch: so look again at least once a timeout.
        now = self.loop.now()
        deadlines = [
            c.last_activity + self._limit(c)
            if c.heard_from
            else min(c.last_activity + self._limit(c), now + self.settings.timeout)
            for c in self.children
            if c.running
        ]
        if deadlines and not self.stopped:
            self.timer = self.loop.call_at(min(deadlines), self._check)

    def _check(self) -> None:
        if self.stopped:
            return
        now = self.loop.now()
        silent = [
            (now - child.last_activity, child)
            for child in self.children
            if child.running and now - child.last_activity >= self._limit(child)
        ]
        if silent:
            seconds, child = max(silent, key=lambda item: item[0])
            self.stop()
            self.on_hang(child, seconds)
            return
        self._schedule()

    def stop(self) -> None:
        self.stopped = True
        if self.timer is not None:
            self.timer.cancel()
