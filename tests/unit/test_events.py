"""The event loop: timers in time order on a virtual clock, readers on real pipes."""

from __future__ import annotations

import functools
import os
from typing import Callable, Iterator, List, Optional, Set, Tuple

import pytest

from malaunch.console.sinks import ReopenedSink
from malaunch.console.stream import ConsoleStream
from malaunch.events import Clock, EventLoop


class VirtualClock(Clock):
    """Time that jumps to the next deadline instead of waiting for it."""

    def __init__(self, start: float = 0.0) -> None:
        self.time = start
        self.blocks: List[Optional[float]] = []

    def now(self) -> float:
        return self.time

    def block_for(self, timeout: Optional[float]) -> Optional[float]:
        self.blocks.append(timeout)
        if timeout is None:
            return None
        self.time += timeout
        return 0.0


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(start=1000.0)


@pytest.fixture
def loop(clock: VirtualClock) -> Iterator[EventLoop]:
    loop = EventLoop(clock)
    yield loop
    loop.close()


class Pipes:
    """The pipes of a test: every end still open is closed at the end, exactly once."""

    def __init__(self) -> None:
        self.open: Set[int] = set()

    def new(self) -> Tuple[int, int]:
        read_end, write_end = os.pipe()
        self.open.update((read_end, write_end))
        return read_end, write_end

    def close(self, fd: int) -> None:
        self.open.remove(fd)
        os.close(fd)


@pytest.fixture
def pipes() -> Iterator[Pipes]:
    made = Pipes()
    yield made
    for fd in sorted(made.open):
        os.close(fd)


def stamp(fired: List[Tuple[str, float]], name: str, clock: Clock) -> Callable[[], None]:
    """A callback that records its name and the time it fired at."""
    return lambda: fired.append((name, clock.now()))


# -- timers -------------------------------------------------------------------------------


def test_timers_fire_in_time_order(loop: EventLoop, clock: VirtualClock) -> None:
    fired: List[Tuple[str, float]] = []
    for name, when in (("c", 1003.0), ("a", 1001.0), ("d", 1010.5), ("b", 1002.0)):
        loop.call_at(when, stamp(fired, name, clock))
    loop.run_until(lambda: len(fired) == 4)
    assert fired == [("a", 1001.0), ("b", 1002.0), ("c", 1003.0), ("d", 1010.5)]
    # The loop blocked exactly until each next deadline.
    assert clock.blocks == [1.0, 1.0, 1.0, 7.5]


def test_ties_fire_in_insertion_order(loop: EventLoop) -> None:
    fired: List[int] = []
    for i in range(10):
        loop.call_at(1005.0, functools.partial(fired.append, i))
    loop.call_at(1001.0, lambda: fired.append(-1))
    loop.run_until(lambda: len(fired) == 11)
    assert fired == [-1, *range(10)]


def test_cancelled_timers_never_fire(loop: EventLoop, clock: VirtualClock) -> None:
    fired: List[str] = []
    first = loop.call_at(1001.0, lambda: fired.append("first"))
    loop.call_at(1002.0, lambda: fired.append("second"))
    later = loop.call_at(1003.0, lambda: fired.append("later"))
    loop.call_at(1002.0, later.cancel)  # cancelled by another timer's callback
    loop.call_at(1004.0, lambda: fired.append("last"))
    first.cancel()
    loop.run_until(lambda: "last" in fired)
    assert fired == ["second", "last"]
    # The cancelled first timer was not even waited for.
    assert clock.blocks[0] == 2.0


def test_timer_cancelled_by_a_timer_due_at_the_same_time(loop: EventLoop) -> None:
    fired: List[str] = []

    def cancel_victim() -> None:
        victim.cancel()

    loop.call_at(1001.0, cancel_victim)  # set first, so it fires first
    victim = loop.call_at(1001.0, lambda: fired.append("victim"))
    loop.call_at(1001.0, lambda: fired.append("after"))
    loop.run_until(lambda: "after" in fired)
    assert fired == ["after"]
    assert victim.cancelled


def test_cancel_after_firing_is_harmless(loop: EventLoop) -> None:
    fired: List[str] = []

    def once() -> None:
        fired.append("once")
        timer.cancel()  # from its own callback

    timer = loop.call_later(1.0, once)
    loop.call_later(2.0, lambda: fired.append("next"))
    loop.run_until(lambda: "next" in fired)
    timer.cancel()  # and after it fired
    assert fired == ["once", "next"]


def test_call_later_is_relative_to_now(loop: EventLoop, clock: VirtualClock) -> None:
    fired: List[float] = []
    clock.time = 2000.0
    timer = loop.call_later(5.0, lambda: fired.append(clock.now()))
    assert timer.when == 2005.0
    assert loop.now() == 2000.0
    loop.run_until(lambda: bool(fired))
    assert fired == [2005.0]


def test_timer_set_by_a_callback_fires_later(loop: EventLoop, clock: VirtualClock) -> None:
    fired: List[Tuple[str, float]] = []

    def first() -> None:
        fired.append(("first", clock.now()))
        loop.call_later(2.5, lambda: fired.append(("second", clock.now())))

    loop.call_later(1.0, first)
    loop.run_until(lambda: len(fired) == 2)
    assert fired == [("first", 1001.0), ("second", 1003.5)]


def test_run_until_stops_when_done(loop: EventLoop) -> None:
    fired: List[int] = []
    for i in range(5):
        loop.call_later(float(i + 1), functools.partial(fired.append, i))
    loop.run_until(lambda: len(fired) >= 2)
    assert fired == [0, 1]
    loop.run_until(lambda: True)  # checked before the first round: nothing runs
    assert fired == [0, 1]
    loop.run_until(lambda: len(fired) >= 5)
    assert fired == [0, 1, 2, 3, 4]


# -- readers ------------------------------------------------------------------------------


def test_reader_is_called_when_readable(loop: EventLoop, pipes: Pipes) -> None:
    read_end, write_end = pipes.new()
    got: List[bytes] = []
    loop.add_reader(read_end, lambda: got.append(os.read(read_end, 100)))
    os.write(write_end, b"hello")
    loop.run_once()  # no timer: blocks until the pipe is readable, which it already is
    assert got == [b"hello"]
    ticks: List[int] = []
    loop.call_later(1.0, lambda: ticks.append(1))
    loop.run_until(lambda: bool(ticks))
    assert got == [b"hello"]  # nothing more to read: not called again
    os.write(write_end, b"again")
    loop.run_once()
    assert got == [b"hello", b"again"]


def test_reader_is_called_at_end_of_file(loop: EventLoop, pipes: Pipes) -> None:
    read_end, write_end = pipes.new()
    got: List[bytes] = []

    def readable() -> None:
        data = os.read(read_end, 100)
        got.append(data)
        if not data:
            loop.remove_reader(read_end)

    loop.add_reader(read_end, readable)
    pipes.close(write_end)
    loop.run_until(lambda: got == [b""])
    assert got == [b""]


def test_remove_reader_stops_it(loop: EventLoop, pipes: Pipes) -> None:
    read_end, write_end = pipes.new()
    got: List[bytes] = []
    loop.add_reader(read_end, lambda: got.append(os.read(read_end, 100)))
    os.write(write_end, b"one")
    loop.run_once()
    assert got == [b"one"]
    loop.remove_reader(read_end)
    loop.remove_reader(read_end)  # twice is harmless
    os.write(write_end, b"two")
    ticks: List[int] = []
    loop.call_later(1.0, lambda: ticks.append(1))
    loop.run_until(lambda: bool(ticks))
    assert got == [b"one"]
    assert os.read(read_end, 100) == b"two"  # still there, unread by the loop


def test_callback_removing_another_reader_in_the_same_round(loop: EventLoop, pipes: Pipes) -> None:
    (read_a, write_a), (read_b, write_b) = pipes.new(), pipes.new()
    called: List[str] = []

    def on_a() -> None:
        called.append("a")
        os.read(read_a, 100)
        loop.remove_reader(read_b)

    def on_b() -> None:
        called.append("b")
        os.read(read_b, 100)
        loop.remove_reader(read_a)

    loop.add_reader(read_a, on_a)
    loop.add_reader(read_b, on_b)
    os.write(write_a, b"x")
    os.write(write_b, b"y")
    loop.run_once()  # both are ready in this one round; whichever runs first removes the other
    assert called in (["a"], ["b"])
    loop.call_later(1.0, lambda: called.append("timer"))
    loop.run_until(lambda: "timer" in called)
    assert len(called) == 2  # the removed reader was never called, though still readable


# -- outputs ------------------------------------------------------------------------------


def test_timers_and_readers_go_on_while_an_output_waits_for_its_reader(
    loop: EventLoop, pipes: Pipes
) -> None:
    """A console whose reader stalls: the loop keeps serving everything else in its one
    select, then flushes what waited once the reader reads again."""
    console_read, console_write = pipes.new()
    stream = ConsoleStream(ReopenedSink(os.open(f"/proc/self/fd/{console_write}",
                                                os.O_WRONLY | os.O_NONBLOCK)))  # fmt: skip
    loop.add_output(stream)
    data = b"x" * 99 + b"\n"
    while stream.write_fd() is None:  # until the pipe is full and lines wait
        stream.write(data)
    waiting = stream.buffered
    read_end, write_end = pipes.new()
    got: List[bytes] = []
    loop.add_reader(read_end, lambda: got.append(os.read(read_end, 100)))
    os.write(write_end, b"from a rank")
    fired: List[int] = []
    loop.call_later(3600.0, lambda: fired.append(1))  # a heartbeat, a hang check
    loop.run_until(lambda: bool(fired))
    assert got == [b"from a rank"] and stream.buffered == waiting
    received = b""
    while stream.write_fd() is not None:
        received += os.read(console_read, 1 << 16)
        loop.run_once()
    os.set_blocking(console_read, False)
    received += os.read(console_read, 1 << 20)
    assert received == data * (len(received) // len(data)) and stream.buffered == 0
    loop.remove_output(stream)
    stream.close()
