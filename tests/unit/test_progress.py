"""What the launcher says while it waits (malaunch.progress)."""

from __future__ import annotations

import io
from typing import Iterator, List

import pytest
from loguru import logger

from malaunch.progress import EVERY, QUIET, Waiting


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def lines() -> Iterator[List[str]]:
    caught: List[str] = []
    sink = logger.add(lambda message: caught.append(str(message).rstrip("\n")), format="{message}")
    yield caught
    logger.remove(sink)


def test_a_short_wait_says_nothing(lines: List[str]) -> None:
    clock = Clock()
    waiting = Waiting("the rank table", stream=io.StringIO(), clock=clock)
    clock.now += QUIET - 0.1
    waiting.update("initializing", 600)
    waiting.done()
    assert lines == []


def test_a_log_gets_a_line_every_ten_seconds(lines: List[str]) -> None:
    clock = Clock()
    waiting = Waiting("the rank table", stream=io.StringIO(), clock=clock)
    for _ in range(int(30 / 0.5)):
        clock.now += 0.5
        waiting.update('status is "initializing"', 600)
    assert lines == [
        f'waiting for the rank table: {s}s of 600 (status is "initializing")' for s in (2, 12, 22)
    ]
    assert EVERY == 10


def test_a_terminal_gets_one_live_line_cleared_at_the_end(lines: List[str]) -> None:
    clock = Clock()
    terminal = Terminal()
    waiting = Waiting("node 0's launcher", stream=terminal, clock=clock)
    for _ in range(8):
        clock.now += 0.5
        waiting.update("connection refused")
    waiting.done()
    out = terminal.getvalue()
    assert lines == []  # nothing through the logger: no scrolling
    # Quiet for 2 s, then a rewrite every 0.5 s (at 2, 2.5, 3, 3.5 and 4 s), and a clear.
    assert out.count("\r\x1b[K") == 6
    assert "malaunch: waiting for node 0's launcher: 4s (connection refused)" in out
    assert out.endswith("\r\x1b[K")
