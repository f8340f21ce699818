"""Printing a run's logs once, or following them like ``tail -f`` until told to stop.

Following polls every :data:`POLL_INTERVAL` seconds: a poll that finds nothing new costs a
``stat`` per log and a read of the index's end, and nothing runs in between. The caller (the
CLI) says when to stop, from its signal handlers, and owns the output.
"""

from __future__ import annotations

import time
from typing import Callable

from malaunch.logs.merge import LogSet

POLL_INTERVAL = 0.1

Write = Callable[[str], None]


def read_once(logs: LogSet, write: Write) -> None:
    """Every line there is now, an unfinished last line included."""
    for text in logs.texts(final=True):
        write(text)


def follow(
    logs: LogSet,
    write: Write,
    flush: Callable[[], None],
    should_stop: Callable[[], bool],
    *,
    interval: float = POLL_INTERVAL,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Every line there is, then each new one as it comes, until ``should_stop()``.

    An unfinished last line waits for its newline. Stopping takes effect between two blocks
    (never inside one) and at the latest one ``interval`` after it was asked for.
    """
    while not should_stop():
        for text in logs.texts(final=False):
            write(text)
            if should_stop():
                break
        flush()
        if not should_stop():
            sleep(interval)
