"""Bytes, rate and ETA of a long transfer: live on a terminal, a line every few seconds in logs."""

from __future__ import annotations

import io
from typing import Iterator, List

import pytest
from loguru import logger

from malaunch.progress import QUIET
from malaunch.staging.progress import EVERY, Progress, human


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def lines() -> Iterator[List[str]]:
    caught: List[str] = []
    sink = logger.add(lambda message: caught.append(str(message).rstrip("\n")), format="{message}")
    yield caught
    logger.remove(sink)


def test_human_sizes() -> None:
    assert [human(n) for n in (0, 1023, 1536, 3 * 2**30)] == ["0 B", "1023 B", "1.5 KiB", "3.0 GiB"]


def test_a_quick_transfer_says_nothing(lines: List[str]) -> None:
    clock = Clock()
    stream = Terminal()
    progress = Progress("stage-in d <- s3://b/p", 100, 2, stream=stream, clock=clock)
    progress.add(100)
    clock.now += QUIET - 0.1
    progress.tick()
    progress.finish()
    assert stream.getvalue() == "" and lines == []


def test_a_terminal_gets_one_live_line(lines: List[str]) -> None:
    clock = Clock()
    stream = Terminal()
    progress = Progress("stage-in d <- s3://b/p", 4 * 2**20, 4, stream=stream, clock=clock)
    clock.now += 4
    progress.add(2**20)
    progress.file_done()
    progress.tick()
    progress.tick()  # not due again yet
    progress.finish()
    assert stream.getvalue() == (
        "\r\x1b[Kmalaunch: stage-in d <- s3://b/p: 1.0 MiB of 4.0 MiB, 1/4 files, 256.0 KiB/s,"
        " ETA 12s\r\x1b[K"
    )
    assert lines == []


def test_a_log_gets_a_line_every_few_seconds(lines: List[str]) -> None:
    clock = Clock()
    progress = Progress("stage-out o -> s3://b/o", 1000, 1, stream=io.StringIO(), clock=clock)
    for _ in range(int(EVERY * 2 + QUIET) * 2):
        clock.now += 0.5
        progress.add(10)
        progress.tick()
    assert len(lines) == 3
    assert lines[0].startswith("stage-out o -> s3://b/o: 40 B of 1000 B, 0/1 file, 20 B/s, ETA 48s")
