"""A node's preparation (data staging's stage-in) in a worker thread, beside the event loop.

A node joins the job first and prepares afterwards, so the loop must keep running meanwhile:
node 0 serves the channel and its heartbeats, the others answer theirs (or node 0 would take a
node that stages in for a lost one), and a signal or the job's ``stop`` must be heard. The
preparation therefore runs in a thread of its own; its end reaches the loop through a pipe,
the one way in from another thread (the loop's timers are not thread-safe, and a pipe also
wakes its ``select``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Callable, Optional

from malaunch.events import EventLoop
from malaunch.supervisor.options import Preparation

# How long a cancelled preparation is waited for (after a signal, or the job's stop, and when
# closing): the files in flight stop at their next piece; a transfer stuck in a dead
# connection must not keep the launcher from exiting.
CLOSE_WAIT = 10.0


class PreparationThread:
    """Runs ``preparation`` once; ``on_done(error)`` is called from the loop when it ended."""

    def __init__(
        self,
        loop: EventLoop,
        preparation: Preparation,
        on_done: Callable[[Optional[BaseException]], None],
    ) -> None:
        self.loop = loop
        self.preparation = preparation
        self.on_done = on_done
        self.error: Optional[BaseException] = None
        self.cancelled = False
        self.ended = False
        self._read_fd, self._write_fd = os.pipe()
        self._thread = threading.Thread(target=self._run, name="malaunch-prepare", daemon=True)

    def start(self) -> None:
        self.loop.add_reader(self._read_fd, self._end)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.preparation.run()
        except BaseException as exc:  # reported by the loop's thread, a bug included
            self.error = exc
        finally:
            with contextlib.suppress(OSError):  # closed: the launcher is going away
                os.write(self._write_fd, b"\0")

    def _end(self) -> None:
        self._thread.join()
        self._close_pipe()
        self.ended = True
        self.on_done(self.error)

    def cancel(self) -> None:
        """Make the preparation stop soon (a signal, or the job stopped before its start)."""
        if not self.cancelled:
            self.cancelled = True
            self.preparation.cancel()

    def abandon(self) -> None:
        """Stop listening for the thread's end without waiting for it (it is a daemon), and
        take away what it leaves half-done."""
        self.cancel()
        self._close_pipe()
        self.ended = True
        if self._thread.is_alive():
            self.preparation.abandon()

    def close(self) -> None:
        """The launcher is going away: stop the preparation, wait a little for the thread."""
        if not self.ended:
            self.cancel()
            self._thread.join(CLOSE_WAIT)
            self._close_pipe()
            self.ended = True
            if self._thread.is_alive():
                self.preparation.abandon()

    def _close_pipe(self) -> None:
        if self._read_fd < 0:
            return
        self.loop.remove_reader(self._read_fd)
        os.close(self._read_fd)
        self._read_fd = -1
        # A thread still running past CLOSE_WAIT writes here at its end: the fd must not be
        # closed (and its number reused by another file) under it; the process is exiting.
        if not self._thread.is_alive():
            os.close(self._write_fd)
