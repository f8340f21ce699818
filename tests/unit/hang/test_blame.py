"""Naming the odd ranks of a hung job from their innermost frames."""

from __future__ import annotations

from typing import Any, Dict, List

from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.hang.blame import (
    MAX_FRAME,
    MAX_GROUPS,
    MAX_LISTED,
    UNKNOWN,
    hang_record,
    odd_ones,
    signature,
)
from malaunch.job.protocol import MAX_MESSAGE, encode

WAIT = "allreduce (distributed.py:2100)"
STUCK = "recv (socket.py:50)"
LOOP = "spin (train.py:12)"


def at(rank: Any, *frames: str) -> Dict[str, Any]:
    return {"rank": rank, "frames": [*frames, "main (train.py:40)", "<module> (train.py:50)"]}


def test_signature_is_the_innermost_frame() -> None:
    assert signature(["a (x.py:1)", "b (x.py:2)"]) == "a (x.py:1)"
    assert signature([]) == UNKNOWN


def test_one_odd_rank_among_many() -> None:
    entries = [at(rank, WAIT) for rank in range(8) if rank != 5] + [at(5, STUCK)]
    verdict = odd_ones(entries)
    assert verdict == {
        "culprits": [5],
        "groups": [
            {"frame": WAIT, "ranks": [0, 1, 2, 3, 4, 6, 7]},
            {"frame": STUCK, "ranks": [5]},
        ],
        "reason": f"rank 5 is elsewhere, in {STUCK}, while ranks 0-4,6-7 wait in {WAIT}",
    }


def test_every_rank_outside_the_largest_group_is_named() -> None:
    entries = [at(r, WAIT) for r in (7, 0, 2, 4)] + [at(6, STUCK), at(1, STUCK), at(3, LOOP)]
    verdict = odd_ones(entries)
    assert verdict["culprits"] == [1, 3, 6]
    assert verdict["groups"] == [
        {"frame": WAIT, "ranks": [0, 2, 4, 7]},
        {"frame": STUCK, "ranks": [1, 6]},
        {"frame": LOOP, "ranks": [3]},
    ]
    assert verdict["reason"] == (
        f"ranks 1,3,6 are elsewhere, ranks 1,6 in {STUCK} and rank 3 in {LOOP}, while ranks "
        f"0,2,4,7 wait in {WAIT}"
    )


def test_all_in_one_place_names_nobody() -> None:
    verdict = odd_ones([at(rank, WAIT) for rank in range(4)])
    assert verdict == {
        "culprits": [],
        "groups": [{"frame": WAIT, "ranks": [0, 1, 2, 3]}],
        "reason": "every rank with a stack is stopped in the same place",
    }


def test_a_tie_names_nobody() -> None:
    verdict = odd_ones([at(0, WAIT), at(1, STUCK), at(2, WAIT), at(3, STUCK), at(4, LOOP)])
    assert verdict["culprits"] == []
    assert verdict["reason"] == "no place holds most of the ranks"
    # Equal groups are ordered by frame, so the listing is stable.
    assert verdict["groups"] == [
        {"frame": WAIT, "ranks": [0, 2]},
        {"frame": STUCK, "ranks": [1, 3]},
        {"frame": LOOP, "ranks": [4]},
    ]


def test_two_ranks_one_each_is_a_tie() -> None:
    assert odd_ones([at(0, WAIT), at(1, STUCK)])["culprits"] == []


def test_ranks_without_frames_are_listed_but_never_blamed() -> None:
    entries: List[Dict[str, Any]] = [
        at(0, WAIT),
        at(1, WAIT),
        {"rank": 2, "frames": []},
        {"rank": 3},
        {"rank": 4, "frames": None},
        {"rank": 5, "frames": "not a list"},
        at(6, STUCK),
    ]
    verdict = odd_ones(entries)
    assert verdict["culprits"] == [6]
    assert verdict["groups"] == [
        {"frame": WAIT, "ranks": [0, 1]},
        {"frame": STUCK, "ranks": [6]},
        {"frame": UNKNOWN, "ranks": [2, 3, 4, 5]},
    ]


def test_unknown_ranks_do_not_count_as_the_largest_group() -> None:
    # Four ranks without a stack outnumber the others, yet the odd rank with a stack is named.
    entries = [{"rank": r, "frames": []} for r in range(4)] + [
        at(4, WAIT),
        at(5, WAIT),
        at(6, STUCK),
    ]
    verdict = odd_ones(entries)
    assert verdict["culprits"] == [6]
    assert verdict["groups"][-1] == {"frame": UNKNOWN, "ranks": [0, 1, 2, 3]}


def test_only_unknown_ranks_names_nobody() -> None:
    verdict = odd_ones([{"rank": 1, "frames": []}, {"rank": 0}])
    assert verdict["culprits"] == []
    assert verdict["groups"] == [{"frame": UNKNOWN, "ranks": [0, 1]}]


def test_no_entries() -> None:
    assert odd_ones([]) == {
        "culprits": [],
        "groups": [],
        "reason": "every rank with a stack is stopped in the same place",
    }


def test_ranks_that_are_not_numbers_sort_last() -> None:
    entries = [at(None, WAIT), at(2, WAIT), at(0, WAIT), at(None, STUCK), at(1, STUCK)]
    verdict = odd_ones(entries)
    assert verdict["groups"][0] == {"frame": WAIT, "ranks": [0, 2, None]}
    assert verdict["culprits"] == [1, None]


# -- the record fits one job channel message, whatever the job's size ---------------------

FRAME_TEXT = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=2000)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    nodes=st.integers(min_value=1, max_value=3000),
    per_node=st.integers(min_value=1, max_value=8),
    frames=st.lists(FRAME_TEXT, min_size=1, max_size=300),
    scatter=st.integers(min_value=1, max_value=50),
)
def test_the_record_of_any_hang_fits_one_message(
    nodes: int, per_node: int, frames: List[str], scatter: int
) -> None:
    """Up to 24,000 ranks over up to 300 frames of up to 2,000 characters (any Unicode: six
    or twelve bytes each as ASCII JSON): the stop that carries the record encodes within
    MAX_MESSAGE, and each list cut short says how long it was."""
    stacks: Dict[int, List[Dict[str, Any]]] = {
        node: [
            {"node": node, "rank": rank, "frames": [frames[rank % scatter % len(frames)]]}
            for rank in range(node * per_node, (node + 1) * per_node)
        ]
        for node in range(nodes)
    }
    silent = {"node": 0, "rank": 0, "role": "worker", "seconds_silent": 30.0}
    record = hang_record(silent, stacks, nodes)
    failure = {"kind": "hang", "node": 0, "rank": 0, "role": "worker", "code": 124}
    stop = {"t": "stop", "attempt": 0, "final": True, "failure": {**failure, "hang": record}}
    assert len(encode({**stop, "decision": "no restart left (--max-restarts 0)"})) <= MAX_MESSAGE
    ranks = nodes * per_node
    groups = record["groups"]
    assert len(groups) <= MAX_GROUPS
    assert record.get("group_count", len(groups)) == len(
        {e["frames"][0] for s in stacks.values() for e in s}
    )
    assert all(len(g["ranks"]) <= MAX_LISTED and len(g["frame"]) <= MAX_FRAME for g in groups)
    if "group_count" not in record:
        assert sum(g.get("rank_count", len(g["ranks"])) for g in groups) == ranks
    assert len(record["culprits"]) <= MAX_LISTED
    assert record.get("nodes_reporting_count", len(record["nodes_reporting"])) == nodes


def test_ten_thousand_ranks_in_one_collective_are_one_counted_group() -> None:
    stacks = {node: [{"node": node, "rank": node, "frames": [WAIT]}] for node in range(10_000)}
    stacks[7] = [{"node": 7, "rank": 7, "frames": [STUCK]}]
    record = hang_record({"node": 7, "rank": 7}, stacks, 10_000)
    assert record["culprits"] == [7]
    assert record["groups"] == [
        {"frame": WAIT, "ranks": [r for r in range(MAX_LISTED + 1) if r != 7], "rank_count": 9999},
        {"frame": STUCK, "ranks": [7]},
    ]
    assert record["nodes_reporting"] == list(range(MAX_LISTED))
    assert record["nodes_reporting_count"] == 10_000
