"""--console-dedup: identical lines of many ranks within the window print once."""

from __future__ import annotations

from typing import List, Optional

from malaunch.events import Clock, EventLoop
from malaunch.supervisor.dedup import WINDOW, Deduper, DedupRelay


class StepClock(Clock):
    """Virtual time that jumps to the next timer when the loop would wait."""

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time

    def block_for(self, timeout: Optional[float]) -> Optional[float]:
        if timeout is not None:
            self.time += timeout
        return 0.0


def relays(loop: EventLoop, out: List[bytes], ranks: int) -> List[DedupRelay]:
    deduper = Deduper(loop, out.append)
    return [DedupRelay(((0, rank, ""), f"rank {rank}"), deduper) for rank in range(ranks)]


def test_identical_lines_of_many_ranks_print_once() -> None:
    loop = EventLoop(StepClock())
    out: List[bytes] = []
    ranks = relays(loop, out, 8)
    for relay in ranks:
        relay.feed(b"epoch 1 done\n")
    ranks[3].feed(b"rank 3 only\n")
    loop.run_once()
    assert out == [b"[ranks 0-7] epoch 1 done\n[rank 3] rank 3 only\n"]


def test_each_ranks_own_lines_keep_their_order_and_gaps_are_shown() -> None:
    loop = EventLoop(StepClock())
    out: List[bytes] = []
    ranks = relays(loop, out, 6)
    for rank in (0, 1, 2, 4, 5):
        ranks[rank].feed(b"a\nb\n")
    ranks[3].feed(b"b\n")
    loop.run_once()
    assert out == [b"[ranks 0-2,4-5] a\n[ranks 0-5] b\n"]


def test_a_rank_repeating_a_line_is_not_folded_into_itself() -> None:
    loop = EventLoop(StepClock())
    out: List[bytes] = []
    (only,) = relays(loop, out, 1)
    only.feed(b"=====\nx\n=====\n")
    loop.run_once()
    assert out == [b"[rank 0] =====\n[rank 0] x\n[rank 0] =====\n"]


def test_lines_wait_one_window_and_partial_lines_wait_for_their_end() -> None:
    clock = StepClock()
    loop = EventLoop(clock)
    out: List[bytes] = []
    first, second = relays(loop, out, 2)
    first.feed(b"same")
    second.feed(b"same\n")
    first.feed(b"\n")
    assert out == []  # nothing before the window ends
    loop.run_once()
    assert clock.time == WINDOW
    assert out == [b"[ranks 0-1] same\n"]


def test_services_are_named_beside_the_ranks() -> None:
    loop = EventLoop(StepClock())
    out: List[bytes] = []
    deduper = Deduper(loop, out.append)
    DedupRelay(((1, 0, "ps 0"), "ps 0"), deduper).feed(b"ready\n")
    DedupRelay(((0, 2, ""), "rank 2"), deduper).feed(b"ready\n")
    loop.run_once()
    assert out == [b"[rank 2, ps 0] ready\n"]
