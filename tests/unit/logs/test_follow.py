"""The follow loop: polls at its interval, prints each line once, stops between blocks."""

from __future__ import annotations

from typing import List

from logs.rundir import MakeNode
from malaunch.logs.follow import follow, read_once
from malaunch.logs.merge import LogSet
from malaunch.logs.select import Selection


def test_follow_polls_prints_and_stops(make_node: MakeNode) -> None:
    run = make_node().attempt(("worker", 0, 0))
    run.chunk(0, b"one\n", 1.0)
    out: List[str] = []
    sleeps: List[float] = []
    flushes: List[int] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 1:
            run.chunk(0, b"two\nthr", 2.0)
        elif len(sleeps) == 2:
            run.chunk(0, b"ee\n", 3.0)

    follow(
        LogSet([run.path], Selection()),
        out.append,
        lambda: flushes.append(1),
        lambda: len(sleeps) >= 3,
        interval=0.15,
        sleep=sleep,
    )
    assert "".join(out).splitlines() == [
        "[node 0 rank 0] one", "[node 0 rank 0] two", "[node 0 rank 0] three",
    ]  # fmt: skip
    assert sleeps == [0.15, 0.15, 0.15] and len(flushes) == 3


def test_a_stop_takes_effect_between_blocks(make_node: MakeNode) -> None:
    run = make_node().attempt(("worker", 0, 0))
    for i in range(5):
        run.chunk(0, b"block %d\n" % i, float(i))
    out: List[str] = []
    follow(LogSet([run.path], Selection()), out.append, lambda: None, lambda: len(out) >= 2)
    assert out == ["[node 0 rank 0] block 0\n", "[node 0 rank 0] block 1\n"]


def test_read_once_prints_all_including_an_unfinished_line(make_node: MakeNode) -> None:
    run = make_node().attempt(("worker", 0, 0))
    run.chunk(0, b"a\nb", 1.0)
    out: List[str] = []
    read_once(LogSet([run.path], Selection()), out.append)
    assert out == ["[node 0 rank 0] a\n[node 0 rank 0] b\n"]
