"""The console writer (malaunch.console.stream) on real pipes and a pseudo-terminal."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import socket
import termios
import threading
from typing import Iterator, List, Optional, Tuple

import pytest

from malaunch import console
from malaunch.console.sinks import ReopenedSink, SocketSink, ToggledSink, open_sink
from malaunch.console.stream import BURST, LIMIT, PATIENCE, RESERVE, ConsoleStream

LINE = b"rank 0 line %06d " + b"." * 80 + b"\n"
NOTE = re.compile(rb"malaunch: warning: (\d+) console lines? dropped: the console's reader did "
                  rb"not keep up; the log files hold them\n")  # fmt: skip


@pytest.fixture
def pipe() -> Iterator[Tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        with contextlib.suppress(OSError):  # closed by the test already
            os.close(fd)


class Clock:
    """Time that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def stream_of(fd: int, clock: Optional[Clock] = None) -> ConsoleStream:
    sink = open_sink(fd)
    assert sink is not None
    return ConsoleStream(sink, clock or Clock())


def fill_and_stall(stream: ConsoleStream, clock: Clock) -> None:
    """Fill the pipe and let lines wait, then let the reader stay away past the patience."""
    while stream.write_fd() is None:
        stream.write(b"rank 0 warm-up line\n")
    clock.now += PATIENCE + 0.1


def read_all(read_fd: int, stream: ConsoleStream) -> bytes:
    """Read the pipe until the stream has nothing left, as a reader that came back."""
    os.set_blocking(read_fd, False)
    got = b""
    while True:
        try:
            got += os.read(read_fd, 1 << 16)
        except BlockingIOError:
            stream.on_writable()
            if stream.write_fd() is None:
                try:
                    return got + os.read(read_fd, 1 << 20)
                except BlockingIOError:
                    return got


def test_a_stalled_pipe_drops_whole_lines_counts_them_and_says_so(
    pipe: Tuple[int, int],
) -> None:
    read_fd, write_fd = pipe
    clock = Clock()
    stream = stream_of(write_fd, clock)
    fill_and_stall(stream, clock)
    total = 30 * (LIMIT // len(LINE) // 10)  # three times what a stalled reader is held
    for start in range(0, total, 10):  # relay blocks of 10 lines; none of these writes blocks
        stream.write(b"".join(LINE % i for i in range(start, start + 10)))
    assert stream.dropped_total > 0
    assert os.get_blocking(write_fd)  # the shared description was left as it was
    stream.write(b"malaunch: warning: the launcher's own\n", keep=True)  # kept while dropping
    got = read_all(read_fd, stream)
    lines = got.splitlines(keepends=True)
    shown = [line for line in lines if line.startswith(b"rank 0 line ")]
    assert shown == [LINE % i for i in range(len(shown))]  # a head, whole and in order
    notes = [NOTE.fullmatch(line) for line in lines if line.startswith(b"malaunch: warning: ")]
    assert lines[-2:] == [b"malaunch: warning: the launcher's own\n", lines[-1]]
    count = notes[-1]
    assert count is not None and int(count[1]) == total - len(shown) == stream.dropped_total
    # Caught up: lines go out again, and the note is not repeated.
    stream.write(LINE % total)
    assert os.read(read_fd, 1 << 16) == LINE % total


def test_a_reader_that_keeps_reading_may_fall_a_burst_behind(pipe: Tuple[int, int]) -> None:
    """Slower than a burst but not stalled (a pipe's reader on a busy machine): nothing is
    dropped until it is BURST bytes behind."""
    read_fd, write_fd = pipe
    stream = stream_of(write_fd)  # the clock stands still: the reader took data just now
    line = b"x" * 1023 + b"\n"
    while stream.buffered + len(line) <= BURST:
        stream.write(line)
    assert stream.dropped_total == 0
    stream.write(line)
    assert stream.dropped_total == 1
    read_all(read_fd, stream)


def test_the_launchers_own_messages_have_a_reserve_then_are_counted(
    pipe: Tuple[int, int],
) -> None:
    read_fd, write_fd = pipe
    clock = Clock()
    stream = stream_of(write_fd, clock)
    fill_and_stall(stream, clock)
    message = b"m" * 1023 + b"\n"
    while stream.buffered + len(message) <= LIMIT:
        stream.write(message)
    stream.write(message)
    assert stream.dropped_total == 1  # a rank's line: the stalled reader's LIMIT is reached
    while stream.buffered + len(message) <= BURST + RESERVE:
        stream.write(message, keep=True)  # the launcher's own: kept
    assert stream.dropped_total == 1
    stream.write(message, keep=True)
    assert stream.dropped_total == 2
    read_all(read_fd, stream)
    assert stream.write_fd() is None


def test_a_reader_that_went_away_ends_the_console_copy_quietly(pipe: Tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    stream = stream_of(write_fd)
    os.close(read_fd)
    stream.write(b"line\n")  # EPIPE: Python ignores SIGPIPE; the copy is given up
    assert stream.broken and stream.write_fd() is None
    stream.write(b"more\n", keep=True)
    assert stream.buffered == 0


def test_put_never_drops_and_wait_follows_a_slow_reader(pipe: Tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    stream = stream_of(write_fd)
    data = b"".join(LINE % i for i in range(3 * LIMIT // len(LINE)))
    stream.put(data)
    assert stream.dropped_total == 0 and stream.buffered > LIMIT
    assert not stream.wait(0.05)  # nobody reads: the wait ends at its timeout
    chunks: List[bytes] = []

    def reader() -> None:
        while True:
            chunk = os.read(read_fd, 4096)
            if not chunk:
                return
            chunks.append(chunk)

    thread = threading.Thread(target=reader)
    thread.start()
    assert stream.wait(60.0)
    stream.close()
    os.close(write_fd)
    thread.join()
    assert b"".join(chunks) == data


def test_the_descriptors_of_one_pipe_share_one_stream(pipe: Tuple[int, int]) -> None:
    """stdout and stderr on one pipe or terminal (2>&1): one buffer keeps their order."""
    _, write_fd = pipe
    other, another = os.dup(write_fd), os.pipe()
    try:
        assert console.stream(write_fd) is console.stream(other)
        assert console.stream(another[1]) is not console.stream(write_fd)
    finally:
        console.finish(0)
        for fd in (other, *another):
            os.close(fd)


def test_a_terminal_under_xoff_does_not_block_and_resumes_on_xon() -> None:
    master, slave = pty.openpty()
    try:
        attrs = termios.tcgetattr(slave)
        attrs[0] |= termios.IXON  # what a terminal does with Ctrl-S / Ctrl-Q
        attrs[1] &= ~termios.ONLCR
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        clock = Clock()
        stream = stream_of(slave, clock)
        assert isinstance(stream.sink, ReopenedSink) and stream.isatty
        os.write(master, b"\x13")  # XOFF (Ctrl-S)
        head = 0
        while stream.write_fd() is None:  # until a line waits: a stopped terminal takes none
            stream.write(LINE % head)
            head += 1
        clock.now += PATIENCE + 0.1
        total = head + 2 * LIMIT // len(LINE)
        for i in range(head, total):
            stream.write(LINE % i)
        assert stream.dropped_total > 0 and stream.buffered > 0
        os.write(master, b"\x11")  # XON (Ctrl-Q)
        got = b""
        flags = fcntl.fcntl(master, fcntl.F_GETFL)
        fcntl.fcntl(master, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        while stream.write_fd() is not None or not got.endswith(b"hold them\n"):
            stream.wait(0.01)
            with contextlib.suppress(BlockingIOError):
                got += os.read(master, 1 << 16)
        lines = got.splitlines(keepends=True)
        match = NOTE.fullmatch(lines[-1])
        assert match is not None
        assert len(lines) - 1 + int(match[1]) == total
        assert lines[:-1] == [LINE % i for i in range(len(lines) - 1)]
        stream.close()
    finally:
        os.close(master)
        os.close(slave)


def test_a_socket_is_written_without_blocking_and_keeps_its_flags() -> None:
    """stdout as a socket (systemd's journal): MSG_DONTWAIT, the descriptor left blocking."""
    ours, theirs = socket.socketpair()
    try:
        clock = Clock()
        stream = stream_of(ours.fileno(), clock)
        assert isinstance(stream.sink, SocketSink)
        fill_and_stall(stream, clock)
        for i in range(2 * LIMIT // len(LINE)):
            stream.write(LINE % i)
        assert stream.dropped_total > 0 and os.get_blocking(ours.fileno())
        stream.close()
    finally:
        ours.close()
        theirs.close()


def test_the_last_resort_sets_non_blocking_only_for_each_write(pipe: Tuple[int, int]) -> None:
    read_fd, write_fd = pipe
    clock = Clock()
    stream = ConsoleStream(ToggledSink(write_fd), clock)
    fill_and_stall(stream, clock)  # the pipe is full: a blocking write would never return
    assert os.get_blocking(write_fd)
    read_all(read_fd, stream)
    assert stream.write_fd() is None and os.get_blocking(write_fd)
