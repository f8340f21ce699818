"""``--console-dedup``: identical lines from many ranks, within a short window, print once.

A collective job often prints the same line on every rank ("epoch 3 done", a warning of the
framework): with 64 ranks the console drowns. With dedup on, each process's complete lines are
held for :data:`WINDOW` seconds; identical lines of different processes seen within the window
are printed once. Lines go out in the order they first arrived, so a rank's own lines keep their
order; the log files always keep every line of every rank, as the process wrote it. This path
costs per-line work, which the default (no dedup) avoids.

A line printed by one process carries that process's own console prefix, exactly as without
dedup. A folded line's prefix says who printed it: ``[ranks 0-7]`` by default; with
``--console-prefix``, the same template, where a field on which the folded processes agree
keeps its value and one on which they differ shows the span of the values when they are all
numbers (``{rank}`` -> ``0-7``, ``0-2,4-5``) and ``*`` otherwise (hosts, roles, a missing
rank). One process's value is never shown as if it were all of theirs. Terminal controls are
escaped as on the plain console (:mod:`malaunch.console.escape`), unless ``--console-raw``.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from malaunch.console import escape_bytes
from malaunch.events import EventLoop, Timer
from malaunch.models import ProcessSpec
from malaunch.supervisor.output import (
    PREFIX_FIELDS,
    LineRelay,
    console_prefix,
    describe,
    fill_prefix,
    prefix_values,
)
from malaunch.wording import ranks as ranks_of
from malaunch.wording import spans

WINDOW = 0.2  # seconds: the ranks of one step print within milliseconds of each other
CACHE_LIMIT = 4096  # folded prefixes kept: a job repeats a few sets of ranks, not thousands

SortKey = Tuple[int, int, str]  # ranks (0, rank, "") sort before the others (1, 0, label)


@dataclasses.dataclass(frozen=True)
class Member:
    """One process as the deduper names it."""

    key: SortKey
    label: str  # "rank 3", "ps 0", "scheduler": the default folded prefix lists these
    prefix: bytes  # its own console prefix: what its unfolded lines carry
    values: Mapping[str, object] = dataclasses.field(default_factory=dict, compare=False)


def member(spec: ProcessSpec, template: Optional[str], **fields: object) -> Member:
    """``spec``'s member, with the node-wide ``fields`` (``node``, ``host``) of its prefix."""
    key = (0, spec.rank, "") if spec.rank is not None else (1, 0, describe(spec))
    prefix = console_prefix(spec, template, **fields)
    return Member(key, describe(spec), prefix, prefix_values(spec, **fields))


@dataclasses.dataclass
class _Pending:
    line: bytes
    members: List[Member]


class Deduper:
    """Collects lines per window and writes each distinct one once with all its senders."""

    def __init__(
        self,
        loop: EventLoop,
        write: Callable[[bytes], None],
        template: Optional[str] = None,
        escape: bool = True,
    ) -> None:
        self.loop = loop
        self.write = write
        self.template = template
        self.escape = escape  # terminal controls shown as text (not with --console-raw)
        self.order: List[_Pending] = []
        self.latest: Dict[bytes, _Pending] = {}
        self.timer: Optional[Timer] = None
        self.folded: Dict[Tuple[SortKey, ...], bytes] = {}

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
            block = b"".join(self._line(p) for p in self.order)
            self.order, self.latest = [], {}
            self.write(block)

    def _line(self, pending: _Pending) -> bytes:
        prefix = self._prefix(pending.members)
        line = escape_bytes(pending.line, prefix) if self.escape else pending.line
        return prefix + line + b"\n"

    def _prefix(self, members: List[Member]) -> bytes:
        if len(members) == 1:
            return members[0].prefix
        # The same ranks fold together step after step: format their prefix once.
        key = tuple(sorted(m.key for m in members))
        prefix = self.folded.get(key)
        if prefix is None:
            if len(self.folded) >= CACHE_LIMIT:
                self.folded.clear()
            prefix = self.folded[key] = _folded(members, self.template)
        return prefix


def _folded(members: List[Member], template: Optional[str]) -> bytes:
    """The prefix of a line several processes printed (see the module's docstring)."""
    if template is not None:
        return fill_prefix(template, {name: _span(members, name) for name in PREFIX_FIELDS})
    ranks = sorted(m.key[1] for m in members if m.key[0] == 0)
    others = sorted(m.label for m in members if m.key[0] != 0)
    parts = [ranks_of(ranks)] if ranks else []
    return f"[{', '.join([*parts, *others])}] ".encode()


def _span(members: List[Member], name: str) -> object:
    """One field over the folded processes: their common value, their span, or ``*``."""
    values = {m.values[name] for m in members}
    if len(values) == 1:
        return values.pop()
    numbers = sorted(value for value in values if isinstance(value, int))
    return spans(numbers) if len(numbers) == len(values) else "*"


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
