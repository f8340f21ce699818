"""How the console writer reaches a descriptor without ever blocking, and without changing it
for anyone else.

``O_NONBLOCK`` belongs to an open file description, which a terminal's descriptors share with
the shell and every other process of the session (and a pipe's with the rest of a pipeline):
setting it on the launcher's stdout would make ``tee`` or the shell fail with EAGAIN. So the
launcher opens its own description of the same pipe or terminal through ``/proc/self/fd/N``
and makes only that one non-blocking. A socket (systemd's journal) is written with
``MSG_DONTWAIT`` instead. Where neither works, the flag is set around each write and put back
at once. A regular file is written as before, blocking: it never waits on a reader.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # imported when stdout is a socket: the launch path does without it
    import socket


class Sink:
    """A regular file (or anything written blocking): each write completes."""

    blocking = True

    def __init__(self, fd: int, tty: bool = False) -> None:
        self.fd = fd  # the descriptor to wait on (select) when a write would block
        self.tty = tty

    def write(self, data: memoryview) -> int:
        """Write some of ``data``; raise BlockingIOError when nothing fits now, OSError when
        the reader is gone."""
        return os.write(self.fd, data)

    def close(self) -> None:
        """Close what this sink opened itself (never the launcher's own stdout or stderr)."""


class ReopenedSink(Sink):
    """A private, non-blocking description of the same pipe or terminal."""

    blocking = False

    def close(self) -> None:
        os.close(self.fd)


class SocketSink(Sink):
    """A socket, sent to with ``MSG_DONTWAIT`` (its description keeps its own flags)."""

    blocking = False

    def __init__(self, sock: socket.socket) -> None:
        import socket  # noqa: PLC0415 (start-up: only a socket console needs it)

        super().__init__(sock.fileno())
        self.sock = sock
        self.flags: int = socket.MSG_DONTWAIT

    def write(self, data: memoryview) -> int:
        return self.sock.send(data, self.flags)

    def close(self) -> None:
        self.sock.close()  # a duplicate: the launcher's own descriptor stays open


class ToggledSink(Sink):
    """The last resort: ``O_NONBLOCK`` only for the instant of each write."""

    blocking = False

    def write(self, data: memoryview) -> int:
        was_blocking = os.get_blocking(self.fd)
        if was_blocking:
            os.set_blocking(self.fd, False)
        try:
            return os.write(self.fd, data)
        finally:
            if was_blocking:
                os.set_blocking(self.fd, True)


def open_sink(fd: int) -> Optional[Sink]:
    """The way to write ``fd`` without blocking; None when ``fd`` is not open."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    tty = os.isatty(fd)
    if stat.S_ISREG(mode):
        return Sink(fd)
    if stat.S_ISSOCK(mode):
        import socket  # noqa: PLC0415 (start-up: only a socket console needs it)

        try:
            return SocketSink(socket.socket(fileno=os.dup(fd)))
        except OSError:
            return ToggledSink(fd, tty)
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        return ReopenedSink(os.open(f"/proc/self/fd/{fd}", flags), tty)
    except OSError:  # no /proc, a terminal we may not open again
        return ToggledSink(fd, tty)
