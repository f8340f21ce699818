"""The launcher's console: stdout and stderr, written by one writer that never blocks.

Everything the launcher shows on a pipe or terminal goes through the :class:`ConsoleStream` of
its descriptor: worker lines relayed by the supervisor (and by ``simulate``), ``--console-dedup``'s
folded lines, the launcher's own messages (the CLI's loguru sink and error line), the waits'
live status line and ``malaunch logs``. When stdout and stderr are the same pipe or terminal
(``2>&1``, an interactive shell), they share one stream, so their lines keep their order even
while the reader is stalled. The event loop flushes the streams
(:meth:`malaunch.events.EventLoop.add_output`); after the summary, :func:`drain` gives a
stalled reader :data:`EXIT_GRACE` seconds to take the rest and then gives up.

Tool commands that print a document (``render``, ``--dry-run``, ``topology --json``) write
through Python's ``sys.stdout`` as usual: their reader gets every byte, however slowly.
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Tuple

from malaunch.console.escape import escape_bytes, escape_text, is_plain
from malaunch.console.sinks import Sink, open_sink
from malaunch.console.stream import ConsoleStream

__all__ = [
    "EXIT_GRACE",
    "ConsoleStream",
    "drain",
    "escape_bytes",
    "escape_text",
    "finish",
    "is_plain",
    "stderr",
    "stdout",
    "streams",
]

EXIT_GRACE = 5.0  # seconds a launcher that has finished waits for a stalled console reader

_by_fd: Dict[int, ConsoleStream] = {}
_by_file: Dict[Tuple[int, int], ConsoleStream] = {}


def stream(fd: int) -> ConsoleStream:
    """The stream of descriptor ``fd`` (made on first use; shared by descriptors of one file)."""
    found = _by_fd.get(fd)
    if found is not None:
        return found
    try:
        info = os.fstat(fd)
        key = (info.st_dev, info.st_ino)
    except OSError:
        key = (-1, -fd - 1)
    found = _by_file.get(key)
    if found is None:
        sink = open_sink(fd)
        found = ConsoleStream(sink if sink is not None else Sink(fd))
        if sink is None:  # not open: nothing is shown, nothing waits
            found.broken = True
        _by_file[key] = found
    _by_fd[fd] = found
    return found


def stdout() -> ConsoleStream:
    """Descriptor 1's stream: the ranks' lines."""
    return stream(1)


def stderr() -> ConsoleStream:
    """Descriptor 2's stream: the launcher's own messages."""
    return stream(2)


def streams() -> List[ConsoleStream]:
    """The streams made so far, each once."""
    return list(_by_file.values())


def drain(grace: float = EXIT_GRACE) -> None:
    """Wait up to ``grace`` seconds in all for every stream to be taken by its reader. A
    stream whose reader is still stalled then is not waited for again (by :func:`finish`)."""
    deadline = time.monotonic() + grace
    for each in streams():
        if not each.given_up and not each.wait(max(0.0, deadline - time.monotonic())):
            each.given_up = True


def finish(grace: float = EXIT_GRACE) -> None:
    """At exit: :func:`drain`, then close the streams; what a reader still stalled has not
    taken is given up."""
    drain(grace)
    for each in streams():
        each.close()
    _by_fd.clear()
    _by_file.clear()
