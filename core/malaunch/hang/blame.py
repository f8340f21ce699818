"""Naming the odd ones out: which ranks of a hung job are stuck somewhere the others are not.

In a collective job a hang usually looks like this: one rank is stuck in its own code (a
deadlock, a stuck read, an endless loop) and every other rank waits for it inside the same
collective call. Grouping the ranks by their innermost frame makes the culprit stand out as a
small group beside one large one.

The record goes to every node in one job channel message, whatever the job's size: at most
:data:`MAX_GROUPS` frames (the largest groups) of :data:`MAX_FRAME` characters, and at most
:data:`MAX_LISTED` ranks in any one list; a list cut short says how long it was
(``rank_count`` in a group, ``group_count`` and ``culprit_count`` beside them). A job of
10,000 ranks waiting in one collective is one group of 10,000 ranks, not a 60 KB list.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

from malaunch.wording import noun_for, spans

UNKNOWN = "<no stack>"
MAX_LISTED = 64  # ranks (or nodes) one list of the record names; the rest are counted
MAX_GROUPS = 10  # frames listed, largest first
MAX_FRAME = 200  # characters of a frame's text (a frame may name a long path)


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
    listed = [_group(frame, ranks) for frame, ranks in ordered]
    if unknown:
        listed.append(_group(UNKNOWN, unknown))
    culprits: List[Any] = []
    reason = "every rank with a stack is stopped in the same place"
    if len(ordered) > 1:
        largest, runner_up = len(ordered[0][1]), len(ordered[1][1])
        if largest > runner_up:
            culprits = sorted((r for _, ranks in ordered[1:] for r in ranks), key=_rank_key)
            reason = _elsewhere(culprits, ordered)
        else:
            reason = "no place holds most of the ranks"
    verdict: Dict[str, Any] = {"culprits": culprits[:MAX_LISTED], "groups": listed[:MAX_GROUPS]}
    if len(culprits) > MAX_LISTED:
        verdict["culprit_count"] = len(culprits)
    if len(listed) > MAX_GROUPS:
        verdict["group_count"] = len(listed)
    return {**verdict, "reason": reason}


def _group(frame: str, ranks: List[Any]) -> Dict[str, Any]:
    """One frame and its ranks (the first :data:`MAX_LISTED`, in order, and their count)."""
    group: Dict[str, Any] = {"frame": frame[:MAX_FRAME], "ranks": sorted(ranks, key=_rank_key)}
    if len(ranks) > MAX_LISTED:
        group["ranks"], group["rank_count"] = group["ranks"][:MAX_LISTED], len(ranks)
    return group


def hang_record(
    hang: Mapping[str, Any], stacks: Mapping[int, Sequence[Mapping[str, Any]]], nnodes: int
) -> Dict[str, Any]:
    """The job's record of a hang: the silent rank as its node reported it (``hang``), the
    odd ones out of every node's ``stacks`` (node -> its ranks' entries), the silent rank's
    stack file, the nodes that reported and those of the job's ``nnodes`` that did not (given
    up on): of each, the first :data:`MAX_LISTED`, and past them their count."""
    entries = [entry for node_entries in stacks.values() for entry in node_entries]
    silent = (hang.get("node"), hang.get("rank"))
    hung = [e for e in entries if (e.get("node"), e.get("rank")) == silent]
    record = {
        **hang,
        **odd_ones(entries),
        "stack_file": hung[0].get("file") if hung else None,
    }
    reporting = sorted(stacks)
    for key, nodes in (
        ("nodes_reporting", reporting),
        ("nodes_silent", sorted(set(range(nnodes)) - set(stacks))),
    ):
        record[key] = nodes[:MAX_LISTED]
        if len(nodes) > MAX_LISTED:
            record[f"{key}_count"] = len(nodes)
    return record


def _elsewhere(culprits: List[Any], ordered: List[Tuple[str, List[Any]]]) -> str:
    """``rank 5 is elsewhere, in recv (socket.py:50), while ranks 0-4,6,7 wait in allreduce
    (distributed.py:2100)``; with several places, each named with its ranks (the
    :data:`MAX_GROUPS` largest, then how many more)."""
    frame, most = ordered[0]
    shown = ordered[1:MAX_GROUPS]
    places = [f"{_named(ranks)} in {where[:MAX_FRAME]}" for where, ranks in shown]
    if len(ordered) > MAX_GROUPS:
        places.append(f"{len(ordered) - MAX_GROUPS} more places")
    where = f"in {ordered[1][0][:MAX_FRAME]}" if len(places) == 1 else " and ".join(places)
    verb = "is" if len(culprits) == 1 else "are"
    most_named = _named(most)
    waiting = f"{most_named} wait in {frame[:MAX_FRAME]}"
    return f"{_named(culprits)} {verb} elsewhere, {where}, while {waiting}"


def _named(ranks: List[Any]) -> str:
    """``rank 5``, ``ranks 0-4,6``; ranks that are not numbers as they are; past
    :data:`MAX_FRAME` characters, cut short (``ranks 0,2,4,...``)."""
    numbers = [rank for rank in ranks if isinstance(rank, int) and not isinstance(rank, bool)]
    others = [str(rank) for rank in ranks if rank not in numbers]
    text = spans(numbers) + (", " if numbers and others else "") + ", ".join(others)
    if len(text) > MAX_FRAME:
        text = text[: max(text.rfind(",", 0, MAX_FRAME), 1)] + ",..."
    return f"{noun_for(len(ranks), 'rank')} {text}"


def _rank_key(rank: Any) -> Tuple[int, int]:
    return (0, rank) if isinstance(rank, int) else (1, 0)
