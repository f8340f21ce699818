"""The one console writer: whole lines to a pipe or terminal from a bounded buffer, never
blocking the launcher.

A write goes out at once when it can. When the reader is slow (a ``| tee`` that blocks, a
terminal paused with Ctrl-S, a slow log shipper), what does not fit waits in a buffer, flushed
by the event loop when the descriptor is writable again (:meth:`ConsoleStream.write_fd`,
:meth:`ConsoleStream.on_writable`). A reader that has taken nothing for :data:`PATIENCE`
seconds is stalled: it is held :data:`LIMIT` bytes. One that reads, only not as fast as a
burst comes (a pipe's reader on a busy machine), may fall :data:`BURST` bytes behind. Past
that, the stream drops console copies, whole, counting their lines, until the reader has
caught up (the buffer is empty); one line then says how many were dropped and that the log
files hold them. The launcher's own messages have :data:`RESERVE` bytes more; ``malaunch
logs``, whose lines are in files that wait, queues without dropping and waits for room
itself (:meth:`ConsoleStream.wait`).

Writes may come from a thread beside the loop (data staging's progress and messages): every
method takes the stream's lock, and a write never waits for the reader.
"""

from __future__ import annotations

import collections
import select
import threading
import time
from typing import Callable, Deque, Optional

from malaunch.console.sinks import Sink
from malaunch.wording import plural

LIMIT = 1 << 20  # bytes of console copies held for a stalled reader (about 10,000 lines)
BURST = 16 << 20  # how far a reader that keeps reading may fall behind a burst
PATIENCE = 1.0  # seconds without taking anything after which a reader counts as stalled
RESERVE = 1 << 18  # more for the launcher's own messages, which are in no log file
BATCH = 1 << 16  # bytes per write syscall when flushing queued pieces

DROPPED_HINT = "the log files hold them"


class ConsoleStream:
    """One descriptor (a pipe, a terminal, a socket or a regular file) and its buffer."""

    def __init__(self, sink: Sink, clock: Callable[[], float] = time.monotonic) -> None:
        self.sink = sink
        self.clock = clock
        self.progress = 0.0  # when the reader last took something (or data began to wait)
        self.queue: Deque[bytes] = collections.deque()
        self.queued = 0  # bytes in the queue
        self.offset = 0  # bytes of queue[0] already written
        self.dropping = False
        self.dropped = 0  # lines dropped since the last note
        self.dropped_total = 0
        self.broken = False  # the reader went away: everything goes to the log files only
        self.given_up = False  # still stalled after the grace at exit: not waited for again
        self.hint = DROPPED_HINT
        self.lock = threading.RLock()

    @property
    def isatty(self) -> bool:
        return self.sink.tty

    @property
    def buffered(self) -> int:
        """Bytes waiting for the reader."""
        return self.queued - self.offset

    # -- writing ---------------------------------------------------------------------------

    def write(self, data: bytes, keep: bool = False) -> None:
        """Whole lines for the console: sent, queued, or (a console copy that does not fit)
        dropped and counted. ``keep``: the launcher's own message, dropped only past
        :data:`RESERVE` more."""
        with self.lock:
            if self.broken or not data:
                return
            self._flush()
            if self._fits(len(data), keep):
                self._send(data)
                return
            self.dropping = self.dropping or not keep
            lines = max(1, data.count(b"\n"))
            self.dropped += lines
            self.dropped_total += lines

    def _fits(self, size: int, keep: bool) -> bool:
        if not self.queue:
            return True
        after = self.buffered + size
        if keep:
            return after <= BURST + RESERVE
        if self.dropping:
            return False  # until the reader has caught up: no half-shown stretches
        reading = self.clock() - self.progress < PATIENCE
        return after <= LIMIT or (reading and after <= BURST)

    def put(self, data: bytes) -> None:
        """Queue ``data`` whatever its size: for a caller that waits for room (:meth:`wait`)."""
        with self.lock:
            if not self.broken and data:
                self._flush()
                self._send(data)

    def _send(self, data: bytes) -> None:
        if self.queue:
            self._enqueue(data)
            return
        view = memoryview(data)
        try:
            written = self._write(view)
        except BlockingIOError:
            written = 0
        if written < len(data) and not self.broken:
            self._enqueue(data[written:] if written else data)

    def _enqueue(self, data: bytes) -> None:
        if not self.queue:
            self.progress = self.clock()
        self.queue.append(data)
        self.queued += len(data)

    def _write(self, view: memoryview) -> int:
        """One write; a blocking sink (a regular file) writes it all."""
        try:
            if not self.sink.blocking:
                return self.sink.write(view)
            total = 0
            while total < len(view):
                total += self.sink.write(view[total:])
            return total
        except BlockingIOError:
            raise
        except OSError:  # EPIPE, EIO: the reader is gone (`| head`, a closed terminal)
            self._break()
            return len(view)

    def _break(self) -> None:
        self.broken = True
        self.queue.clear()
        self.queued = self.offset = 0

    # -- flushing --------------------------------------------------------------------------

    def write_fd(self) -> Optional[int]:
        """The descriptor to wait on while data waits for the reader (None: nothing waits)."""
        return self.sink.fd if self.queue and not self.broken else None

    def on_writable(self) -> None:
        """The reader has room: write what waits, and say what was dropped once all is out."""
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        while self.queue and not self.broken:
            head = self._batch()
            try:
                written = self._write(memoryview(head)[self.offset :])
            except BlockingIOError:
                return
            if self.broken:
                return
            if written:
                self.progress = self.clock()
            self.offset += written
            if self.offset < len(head):
                return
            self.queue.popleft()
            self.queued -= len(head)
            self.offset = 0
        if self.dropped and not self.queue and not self.broken:
            self._note()

    def _batch(self) -> bytes:
        """The queue's head, joined with the small pieces after it (fewer syscalls)."""
        if self.offset or len(self.queue) < 2 or len(self.queue[0]) >= BATCH:
            return self.queue[0]
        pieces, size = [], 0
        while self.queue and size + len(self.queue[0]) <= BATCH:
            piece = self.queue.popleft()
            pieces.append(piece)
            size += len(piece)
        if not pieces:
            return self.queue[0]
        joined = b"".join(pieces)
        self.queue.appendleft(joined)
        return joined

    def _note(self) -> None:
        count, self.dropped, self.dropping = self.dropped, 0, False
        lines = plural(count, "console line")
        text = f"malaunch: warning: {lines} dropped: the console's reader did not keep up; "
        self._send(f"{text}{self.hint}\n".encode())

    def wait(self, timeout: float, below: int = 0) -> bool:
        """Wait at most ``timeout`` seconds for the buffer to hold at most ``below`` bytes
        (a drop note included); return whether it does."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                self._flush()
                fd = self.write_fd()
                if fd is None or self.buffered <= below:
                    return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            poll = select.poll()  # not select(): the descriptor may be past FD_SETSIZE
            poll.register(fd, select.POLLOUT)
            poll.poll(left * 1000)

    def close(self) -> None:
        with self.lock:
            self.sink.close()
            self._break()
