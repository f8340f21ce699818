"""Retry warnings told in aggregate: a server that goes away under 32 transfers in flight must
not bury the one error line under a warning per file per try."""

from __future__ import annotations

import threading
from typing import Iterator, List

import pytest

from malaunch.log import logger
from malaunch.staging import RetryPolicy, StagingError
from malaunch.staging.transfer import RetryNotes, retrying

NO_WAIT = RetryPolicy(attempts=3, first=0.0)


@pytest.fixture
def messages() -> Iterator[List[str]]:
    caught: List[str] = []
    sink = logger.add(lambda message: caught.append(str(message).rstrip("\n")), format="{message}")
    yield caught
    logger.remove(sink)


class Ticks:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.time = 0.0

    def __call__(self) -> float:
        self.time += 1.0
        return self.time


def always_down() -> None:
    raise ConnectionError("server gone")


def test_forty_files_against_a_dead_server_make_a_few_lines(messages: List[str]) -> None:
    notes = RetryNotes(Ticks(), every=30.0)
    stop = threading.Event()
    for index in range(40):
        with pytest.raises(StagingError, match=f"s3://b/f{index}: ConnectionError"):
            retrying(always_down, f"s3://b/f{index}", NO_WAIT, stop, notes=notes)
    notes.flush()
    # 80 retries (2 per file): the first told alone, then one counted line per 30 "seconds"
    # (each retry reads the clock once), the rest at the flush
    assert messages[0] == "s3://b/f0: ConnectionError: server gone; retrying in 0.0s"
    assert messages[1] == (
        "30 more retries of 16 files (the last: s3://b/f15: ConnectionError: server gone; "
        "retrying in 0.0s)"
    )
    assert len(messages) == 4
    assert messages[-1].startswith("19 more retries of 10 files (the last: s3://b/f39: ")
    counted = sum(int(line.split()[0]) for line in messages[1:])
    assert counted + 1 == 40 * 2


def test_after_a_quiet_spell_a_retry_is_told_alone_again(messages: List[str]) -> None:
    clock = Ticks()
    notes = RetryNotes(clock, every=5.0)
    notes.note("s3://b/a", "ConnectionError: x", 1.0)  # t=1: told
    notes.note("s3://b/b", "ConnectionError: x", 1.0)  # t=2: counted
    notes.flush()  # the end of the pass
    clock.time = 100.0
    notes.note("s3://b/c", "ConnectionError: y", 2.0)
    assert messages == [
        "s3://b/a: ConnectionError: x; retrying in 1.0s",
        "1 more retry of 1 file (the last: s3://b/b: ConnectionError: x; retrying in 1.0s)",
        "s3://b/c: ConnectionError: y; retrying in 2.0s",
    ]
