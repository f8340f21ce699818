"""Warnings that strangers can cause, bounded: anyone who can reach the job port can open
connections by the thousand, and each must not cost a line of the launcher's log.

A :class:`Throttle` shows at most ``burst`` lines per ``window`` seconds and counts the rest;
when the window ends, one line says how many it did not show (that line counts against the
next window, so a steady flood gives one line per window).
"""

from __future__ import annotations

from typing import Callable, Optional

from malaunch.events import EventLoop, Timer
from malaunch.log import logger

WINDOW = 10.0  # seconds


class Throttle:
    """At most ``burst`` warnings per ``window`` seconds; ``summary(count, seconds)`` words the
    line for the ones not shown."""

    def __init__(
        self,
        loop: EventLoop,
        burst: int,
        summary: Callable[[int, float], str],
        window: float = WINDOW,
    ) -> None:
        self.loop = loop
        self.burst = burst
        self.summary = summary
        self.window = window
        self.start: Optional[float] = None  # when the current window began
        self.used = 0  # lines shown in it
        self.hidden = 0  # warnings counted, not shown, since the last line
        self.timer: Optional[Timer] = None

    def warn(self, text: str) -> None:
        now = self.loop.now()
        if self.timer is None and (self.start is None or now - self.start >= self.window):
            self.start, self.used = now, 0
        if self.used < self.burst:
            self.used += 1
            logger.warning(text)
            return
        self.hidden += 1
        if self.timer is None:
            assert self.start is not None
            self.timer = self.loop.call_at(self.start + self.window, self._flush)

    def _flush(self) -> None:
        self.timer = None
        if not self.hidden:
            return
        now = self.loop.now()
        assert self.start is not None
        logger.warning(self.summary(self.hidden, now - self.start))
        self.start, self.used, self.hidden = now, 1, 0

    def close(self) -> None:
        """Say what is still counted (the channel is closing) and stop the timer."""
        if self.timer is not None:
            self.timer.cancel()
        self._flush()
