"""``--console-dedup``: identical lines from many ranks, within a short window, print once.

A collective job often prints the same line on every rank ("epoch 3 done", a warning of the
framework): with 64 ranks the console drowns. With dedup on, each process's complete lines are
held for :data:`WINDOW` seconds; identical lines of different processes seen within the window
are printed once, prefixed ``[ranks 0-7]``. Lines go out in the order they first arrived, so a
rank's own lines keep their order; the log files always keep every line of every rank, as the
process wrote it. This path costs per-line work, which the default (no dedup) avoids.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Tuple

from malaunch.events import EventLoop, Timer
from malaunch.supervisor.output import LineRelay

WINDOW = 0.2  # seconds: the ranks of one step print within milliseconds of each other

Member = Tuple[Tuple[int, int, str], str]  # (sort key, label): ranks sort before the others


@dataclasses.dataclass
class _Pending:
    line: bytes
    members: List[Member]


class Deduper:
    """Collects lines per window and writes each distinct one once with all its senders."""

    def __init__(self, loop: EventLoop, write: Callable[[bytes], None]) -> None:
        self.loop = loop
        self.write = write
        self.order: List[_Pending] = []
        self.latest: Dict[bytes, _Pending] = {}
        self.timer: Optional[Timer] = None

    def add(self, member: Member, line: bytes) -> None:
        pending = self.latest.get(line)
        if pending is None or member in pending.members:  # a rank repeating itself is news
            pending = _Pending(line, [])
            self.latest[line] = pending
            self.order.append(pending)
        pending.members.append(member)
        if self.timer is None:
            self.timer = self.loop.call_later(WINDOW, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.order:
            block = b"".join(_prefix(p.members) + p.line + b"\n" for p in self.order)
            self.order, self.latest = [], {}
            self.write(block)


def _prefix(members: List[Member]) -> bytes:
    if len(members) == 1:
        return f"[{members[0][1]}] ".encode()
    ranks = sorted(key[1] for key, _ in members if key[0] == 0)
    others = sorted(label for key, label in members if key[0] != 0)
    parts = [f"rank{'s' if len(ranks) > 1 else ''} {_ranges(ranks)}"] if ranks else []
    return f"[{', '.join([*parts, *others])}] ".encode()


def _ranges(ranks: List[int]) -> str:
    """``0-3,5,7-8``."""
    spans: List[List[int]] = []
    for rank in ranks:
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in spans)


class DedupRelay(LineRelay):
    """A process's relay that hands whole lines to the :class:`Deduper` instead of the console."""

    def __init__(self, member: Member, deduper: Deduper) -> None:
        super().__init__(b"", deduper.write)
        self.member = member
        self.deduper = deduper

    def feed(self, chunk: bytes) -> None:
        data = self.partial + chunk
        *lines, self.partial = data.split(b"\n")
        for line in lines:
            self.deduper.add(self.member, line)
        if len(self.partial) >= (1 << 20):
            self.flush()

    def flush(self) -> None:
        if self.partial:
            self.deduper.add(self.member, self.partial)
            self.partial = b""
