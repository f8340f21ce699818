"""The summary's hang line: the reason that names the odd ranks, and the nodes given up on."""

from __future__ import annotations

from malaunch.supervisor.summary import hang_line

REASON = "rank 5 is elsewhere, in recv (s.py:5), while ranks 0-4 wait in allreduce (d.py:2)"


def test_the_reason_is_the_line() -> None:
    assert hang_line({"reason": REASON, "culprits": [5]}) == f"hang: {REASON}"


def test_nobody_singled_out_is_said() -> None:
    reason = "no place holds most of the ranks"
    assert hang_line({"reason": reason, "culprits": []}) == (
        "hang: no place holds most of the ranks: no rank singled out"
    )


def test_the_nodes_whose_stacks_were_not_waited_for_are_named() -> None:
    hang = {"reason": REASON, "culprits": [5], "nodes_silent": [1, 3]}
    assert hang_line(hang) == f"hang: {REASON} (no stacks from nodes 1,3 within 15s)"
