"""Printing a run's logs once, or following them like ``tail -f`` until told to stop.

Following polls every :data:`POLL_INTERVAL` seconds: a poll that finds nothing new costs a
``stat`` per log and a read of the index's end, and nothing runs in between. The caller (the
CLI) says when to stop, from its signal handlers.

The lines go out through the one console writer (:class:`Output`): written without blocking,
and, since they wait in files that nobody removes, never dropped: a slow reader (a pager)
makes ``malaunch logs`` wait for it, and a stop request ends that wait within
:data:`POLL_INTERVAL`.
"""

from __future__ import annotations

import time
from typing import Callable

from malaunch.console import ConsoleStream
from malaunch.console.stream import LIMIT
from malaunch.logs.merge import LogSet

POLL_INTERVAL = 0.1


class Output:
    """``malaunch logs``' stdout: UTF-8 text to a console stream, at most :data:`LIMIT`
    bytes ahead of its reader. :class:`BrokenPipeError` once the reader has gone away."""

    def __init__(
        self, stream: ConsoleStream, should_stop: Callable[[], bool] = lambda: False
    ) -> None:
        self.stream = stream
        self.should_stop = should_stop

    def write(self, text: str) -> None:
        """Queue ``text``; wait while more than :data:`LIMIT` bytes wait for the reader."""
        self._check()
        self.stream.put(text.encode("utf-8", "surrogateescape"))
        self._wait(LIMIT)

    def flush(self) -> None:
        """Wait until the reader has everything (or a stop is asked for)."""
        self._wait(0)
        self._check()

    def _wait(self, below: int) -> None:
        while not self.stream.wait(POLL_INTERVAL, below) and not self.should_stop():
            pass

    def _check(self) -> None:
        if self.stream.broken:
            raise BrokenPipeError("the reader of stdout went away")


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
