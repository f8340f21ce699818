"""Rank specs such as ``all``, ``none`` or ``0,3-5``: which ranks (or nodes) an option means.

Ranges are kept as ranges, never expanded, so ``0-999999999`` costs what ``0-1`` costs; every
number is at most :data:`~malaunch.numbers.MAX_RANK` and written in ASCII digits.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from malaunch.errors import UsageError
from malaunch.numbers import MAX_RANK, is_plain_int

MAX_ITEMS = 1000  # comma-separated items in one spec


@dataclasses.dataclass(frozen=True)
class RankSpec:
    """Inclusive ``(first, last)`` intervals; ``None`` means every rank."""

    intervals: Optional[Tuple[Tuple[int, int], ...]]

    def __contains__(self, rank: object) -> bool:
        if self.intervals is None:
            return True
        return isinstance(rank, int) and any(a <= rank <= b for a, b in self.intervals)

    @property
    def everything(self) -> bool:
        return self.intervals is None


def parse_rank_spec(spec: str, option: str) -> RankSpec:
    """``all``, ``none``, or comma-separated ranks and ranges; UsageError naming ``option``."""
    text = spec.strip().lower()
    if text == "all":
        return RankSpec(None)
    if text == "none":
        return RankSpec(())
    items = text.split(",")
    if len(items) > MAX_ITEMS:
        msg = f"{option} {spec[:40]!r}...: more than {MAX_ITEMS} items"
        raise UsageError(msg)
    return RankSpec(tuple(_interval(spec, option, item.strip()) for item in items))


def _interval(spec: str, option: str, item: str) -> Tuple[int, int]:
    low, sep, high = item.partition("-")
    if not (is_plain_int(low) and (not sep or is_plain_int(high))):
        msg = f"{option} {spec!r}: expected all, none, or numbers like 0,3-5 (got {item!r})"
        raise UsageError(msg)
    first, last = int(low), int(high) if sep else int(low)
    if last > MAX_RANK:
        msg = f"{option} {spec!r}: {last} is above the largest rank, {MAX_RANK}"
        raise UsageError(msg)
    if last < first:
        msg = f"{option} {spec!r}: range {item!r} ends before it starts"
        raise UsageError(msg)
    return first, last
