"""Naming the odd ranks of a hung job from their innermost frames."""

from __future__ import annotations

from typing import Any, Dict, List

from malaunch.hang.blame import UNKNOWN, odd_ones, signature

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
