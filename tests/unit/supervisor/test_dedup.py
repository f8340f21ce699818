"""--console-dedup: identical lines of many ranks within the window print once."""

from __future__ import annotations

from typing import List, Optional

from malaunch.events import Clock, EventLoop
from malaunch.models import ProcessSpec
from malaunch.supervisor.dedup import WINDOW, Deduper, DedupRelay, member

TEMPLATE = "[{node}/{host} r{rank} l{local_rank} {role}] "


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


def spec(role: str, rank: Optional[int], local_rank: Optional[int]) -> ProcessSpec:
    return ProcessSpec(role=role, rank=rank, local_rank=local_rank, argv=("x",), cwd=".",
                       log_file="x.log")  # fmt: skip


def relay(deduper: Deduper, process: ProcessSpec, node: int = 0) -> DedupRelay:
    fields = {"node": node, "host": f"10.0.0.{node + 1}"}
    return DedupRelay(member(process, deduper.template, **fields), deduper)


def relays(
    loop: EventLoop, out: List[bytes], ranks: int, template: Optional[str] = None
) -> List[DedupRelay]:
    deduper = Deduper(loop, out.append, template)
    return [relay(deduper, spec("worker", rank, rank)) for rank in range(ranks)]


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
    relay(deduper, spec("ps", None, 0)).feed(b"ready\n")
    relay(deduper, spec("worker", 2, 2)).feed(b"ready\n")
    loop.run_once()
    assert out == [b"[rank 2, ps 0] ready\n"]


def test_with_a_template_a_single_ranks_line_carries_its_own_prefix() -> None:
    loop = EventLoop(StepClock())
    out: List[bytes] = []
    ranks = relays(loop, out, 2, TEMPLATE)
    ranks[1].feed(b"only me\n")
    ranks[0].feed(b"=====\n=====\n")  # repeated by one rank: not folded into itself
    loop.run_once()
    assert out == [
        b"[0/10.0.0.1 r1 l1 worker] only me\n"
        b"[0/10.0.0.1 r0 l0 worker] =====\n"
        b"[0/10.0.0.1 r0 l0 worker] =====\n"
    ]


def test_a_folded_lines_template_shows_spans_of_the_fields_that_differ() -> None:
    loop = EventLoop(StepClock())
    out: List[bytes] = []
    ranks = relays(loop, out, 6, TEMPLATE)
    for rank in (0, 1, 2, 4, 5):
        ranks[rank].feed(b"a\n")
    loop.run_once()
    assert out == [b"[0/10.0.0.1 r0-2,4-5 l0-2,4-5 worker] a\n"]


def test_a_folded_lines_template_shows_a_star_for_differing_text_or_missing_ranks() -> None:
    loop = EventLoop(StepClock())
    out: List[bytes] = []
    deduper = Deduper(loop, out.append, TEMPLATE)
    relay(deduper, spec("chief", 0, 0)).feed(b"ready\n")
    relay(deduper, spec("worker", 1, 1)).feed(b"ready\n")
    relay(deduper, spec("ps", None, 0)).feed(b"ready\n")
    relay(deduper, spec("ps", None, 1)).feed(b"ready\n")
    relay(deduper, spec("ps", None, 0)).feed(b"up\n")
    relay(deduper, spec("ps", None, 1)).feed(b"up\n")
    loop.run_once()
    assert out == [b"[0/10.0.0.1 r* l0-1 *] ready\n[0/10.0.0.1 r- l0-1 ps] up\n"]


def test_the_same_fold_in_the_next_window_gets_the_same_prefix() -> None:
    loop = EventLoop(StepClock())
    out: List[bytes] = []
    ranks = relays(loop, out, 3, "<{rank}> ")
    for step in range(2):
        for one in ranks:
            one.feed(b"step %d\n" % step)
        loop.run_once()
    assert out == [b"<0-2> step 0\n", b"<0-2> step 1\n"]


def test_folded_and_single_lines_are_escaped_for_the_terminal_unless_raw() -> None:
    """A folded line's carriage return repeats its folded prefix; controls show as text."""
    loop = EventLoop(StepClock())
    out: List[bytes] = []
    ranks = relays(loop, out, 2)
    for each in ranks:
        each.feed(b"\x1b]0;title\x07 50%\r100%\n")
    ranks[1].feed(b"\x1b[32mok\x1b[0m \x9b2J\n")
    loop.run_once()
    assert out == [
        b"[ranks 0-1] \\x1b]0;title\\x07 50%\r[ranks 0-1] 100%\n"
        b"[rank 1] \x1b[32mok\x1b[0m \\x9b2J\n"
    ]
    raw: List[bytes] = []
    deduper = Deduper(loop, raw.append, escape=False)
    relay(deduper, spec("worker", 0, 0)).feed(b"\x1b]0;title\x07\rx\n")
    loop.run_once()
    assert raw == [b"[rank 0] \x1b]0;title\x07\rx\n"]
