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
            reason = f"most ranks wait in {ordered[0][0][:MAX_FRAME]}; these are elsewhere"
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
    hang: Mapping[str, Any], stacks: Mapping[int, Sequence[Mapping[str, Any]]]
) -> Dict[str, Any]:
    """The job's record of a hang: the silent rank as its node reported it (``hang``), the
    odd ones out of every node's ``stacks`` (node -> its ranks' entries), the silent rank's
    stack file, and the nodes that reported (the first :data:`MAX_LISTED`, and their count)."""
    entries = [entry for node_entries in stacks.values() for entry in node_entries]
    silent = (hang.get("node"), hang.get("rank"))
    hung = [e for e in entries if (e.get("node"), e.get("rank")) == silent]
    nodes = sorted(stacks)
    record = {
        **hang,
        **odd_ones(entries),
        "stack_file": hung[0].get("file") if hung else None,
        "nodes_reporting": nodes[:MAX_LISTED],
    }
    if len(nodes) > MAX_LISTED:
        record["nodes_reporting_count"] = len(nodes)
    return record


def _rank_key(rank: Any) -> Tuple[int, int]:
    return (0, rank) if isinstance(rank, int) else (1, 0)
