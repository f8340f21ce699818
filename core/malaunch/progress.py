"""Saying what the launcher waits for, and for how long.

A wait that prints nothing looks like a hang: a rank table that never completes used to give
600 s of silence, then exit 69. While the launcher waits (for the rank table, for the other
node launchers, for data), it shows one live line on a terminal, rewritten in place at most
twice a second, and in a log (not a terminal) one line every :data:`EVERY` seconds. A wait
that ends within :data:`QUIET` seconds says nothing: most do.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, TextIO

from malaunch import console
from malaunch.log import logger

EVERY = 10.0
QUIET = 2.0
LIVE_EVERY = 0.5


class StatusLine:
    """Where a progress line goes: rewritten in place on a terminal, or a log line (the one
    piece shared by the waits here and data staging's transfer progress).

    Without ``stream``, stderr's console stream (:mod:`malaunch.console`): a live line is
    skipped, not queued, while the terminal's reader is behind."""

    def __init__(self, stream: Optional[TextIO] = None, every: float = EVERY) -> None:
        self.stream = stream
        self.live = _is_terminal(stream) if stream is not None else console.stderr().isatty
        self.every = every
        self.shown = False

    def show(self, text: str) -> float:
        """Show ``text``; return how long until the next line is due."""
        self.shown = True
        if self.live:
            self._write(f"\r\x1b[Kmalaunch: {text}", update=True)
            return LIVE_EVERY
        logger.info(text)
        return self.every

    def clear(self) -> None:
        """Clear the live line, if one was shown."""
        if self.live and self.shown:
            self._write("\r\x1b[K", update=False)

    def _write(self, text: str, update: bool) -> None:
        if self.stream is not None:
            self.stream.write(text)
            self.stream.flush()
            return
        stream = console.stderr()
        if update and stream.buffered:
            return  # the reader is behind: a later update says the same, newer
        stream.write(text.encode("utf-8", "backslashreplace"), keep=True)


class Waiting:
    """One wait: call :meth:`update` as often as convenient, :meth:`done` at the end."""

    def __init__(
        self,
        what: str,
        stream: Optional[TextIO] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.status = StatusLine(stream)
        self.clock = clock
        self.started = clock()
        self.next_line = self.started + QUIET

    def update(self, detail: str, limit: Optional[float] = None) -> None:
        """The wait goes on because of ``detail``; ``limit``: the deadline in seconds."""
        now = self.clock()
        if now < self.next_line:
            return
        waited = now - self.started
        of = f" of {limit:g}" if limit is not None else ""
        text = f"waiting for {self.what}: {waited:.0f}s{of} ({detail})"
        self.next_line = now + self.status.show(text)

    def done(self) -> None:
        self.status.clear()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
