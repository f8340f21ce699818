"""Bytes, rate and ETA of a transfer that takes more than a few seconds.

As :mod:`malaunch.progress`: nothing for the first :data:`QUIET` seconds (most passes are
quick, and a second run with nothing changed says nothing), then one live line on a terminal,
rewritten at most twice a second, or in a log one line every :data:`EVERY` seconds. The
transfer threads add bytes as they go; the thread that waits for them calls :meth:`tick`.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional, TextIO

from malaunch.progress import QUIET, StatusLine
from malaunch.wording import plural

EVERY = 5.0
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human(count: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    value = float(count)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


class Progress:
    """One pass over one mapping: ``total`` bytes in ``files`` files expected."""

    def __init__(
        self,
        what: str,
        total: int,
        files: int,
        stream: Optional[TextIO] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.total = total
        self.files = files
        self.status = StatusLine(stream, every=EVERY)
        self.clock = clock
        self.started = clock()
        self.next_line = self.started + QUIET
        self.done_bytes = 0
        self.done_files = 0
        self.lock = threading.Lock()

    def add(self, count: int) -> None:
        """``count`` more bytes arrived (any thread)."""
        with self.lock:
            self.done_bytes += count

    def file_done(self) -> None:
        with self.lock:
            self.done_files += 1

    def line(self) -> str:
        """``data <- s3://b/p: 412.3 MiB of 1.0 GiB, 38/256 files, 96.1 MiB/s, ETA 6s``."""
        elapsed = max(self.clock() - self.started, 1e-6)
        with self.lock:
            done, files = self.done_bytes, self.done_files
        rate = done / elapsed
        eta = f"ETA {(self.total - done) / rate:.0f}s" if rate > 0 else "ETA ?"
        return (
            f"{self.what}: {human(done)} of {human(self.total)}, "
            f"{files}/{plural(self.files, 'file')}, {human(rate)}/s, {eta}"
        )

    def tick(self) -> None:
        """Show the line if it is due."""
        now = self.clock()
        if now < self.next_line:
            return
        self.next_line = now + self.status.show(self.line())

    def finish(self) -> None:
        """Clear the live line."""
        self.status.clear()
