"""Naming the odd ones out: which ranks of a hung job are stuck somewhere the others are not.

In a collective job a hang usually looks like this: one rank is stuck in its own code (a
deadlock, a stuck read, an endless loop) and every other rank waits for it inside the same
collective call. Grouping the ranks by their innermost frame makes the culprit stand out as a
small group beside one large one.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

from malaunch.wording import noun_for, spans

UNKNOWN = "<no stack>"


def signature(frames: Sequence[Any]) -> str:
    """The innermost frame (``func (file:line)``), the key ranks are grouped by."""
    return str(frames[0]) if frames else UNKNOWN


def odd_ones(entries: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Group ``{"rank", "frames", ...}`` entries by innermost frame; name the odd ranks.

    ``culprits`` are the ranks outside the one largest group when there is exactly one
    largest group and the others are smaller; otherwise (every rank in one place, or a tie)
    nobody is singled out and ``culprits`` is empty. ``groups`` lists every group, largest
    first.
    """
    groups: Dict[str, List[Any]] = {}
    for entry in entries:
        frames = entry.get("frames")
        key = signature(frames if isinstance(frames, list) else [])
        groups.setdefault(key, []).append(entry.get("rank"))
    # Ranks whose stack could not be read are listed but never blamed for it.
    unknown = groups.pop(UNKNOWN, [])
    ordered: List[Tuple[str, List[Any]]] = sorted(
        groups.items(), key=lambda item: (-len(item[1]), item[0])
    )
    listed = [{"frame": frame, "ranks": sorted(ranks, key=_rank_key)} for frame, ranks in ordered]
    if unknown:
        listed.append({"frame": UNKNOWN, "ranks": sorted(unknown, key=_rank_key)})
    culprits: List[Any] = []
    reason = "every rank with a stack is stopped in the same place"
    if len(ordered) > 1:
        largest, runner_up = len(ordered[0][1]), len(ordered[1][1])
        if largest > runner_up:
            culprits = sorted((r for _, ranks in ordered[1:] for r in ranks), key=_rank_key)
            reason = _elsewhere(culprits, ordered)
        else:
            reason = "no place holds most of the ranks"
    return {"culprits": culprits, "groups": listed, "reason": reason}


def _elsewhere(culprits: List[Any], ordered: List[Tuple[str, List[Any]]]) -> str:
    """``rank 5 is elsewhere, in recv (socket.py:50), while ranks 0-4,6,7 wait in allreduce
    (distributed.py:2100)``; with several places, each named with its ranks."""
    frame, most = ordered[0]
    places = [f"{_named(ranks)} in {where}" for where, ranks in ordered[1:]]
    where = f"in {ordered[1][0]}" if len(places) == 1 else " and ".join(places)
    verb = "is" if len(culprits) == 1 else "are"
    return f"{_named(culprits)} {verb} elsewhere, {where}, while {_named(most)} wait in {frame}"


def _named(ranks: List[Any]) -> str:
    """``rank 5``, ``ranks 0-4,6``; ranks that are not numbers as they are."""
    numbers = [rank for rank in ranks if isinstance(rank, int) and not isinstance(rank, bool)]
    others = [str(rank) for rank in ranks if rank not in numbers]
    text = spans(numbers) + (", " if numbers and others else "") + ", ".join(others)
    return f"{noun_for(len(ranks), 'rank')} {text}"


def _rank_key(rank: Any) -> Tuple[int, int]:
    return (0, rank) if isinstance(rank, int) else (1, 0)
