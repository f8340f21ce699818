"""Time as the supervisor sees it: injectable, so deadlines can be tested without waiting.

The event loop never sleeps on its own: it blocks in ``select`` until an event or its next
deadline (the SIGKILL after the grace period, the end of the drain, a timer of the job
channel). :meth:`Clock.block_for` turns "my next deadline is T seconds away" into how long the
kernel wait may really last. The real clock returns T unchanged; a test's virtual clock jumps
its own time forward by T and returns 0, so a one-hour grace period passes at once while real
events (output, exits, signals) still arrive through the same ``select``.
"""

from __future__ import annotations

import time
from typing import Optional


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
