"""``spans``: numbers in one short line, the one folding of node and rank lists (the report's
device table, rank-table summaries, folded console lines, node 0's wait for the nodes)."""

from __future__ import annotations

from typing import List, Set

from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.numbers import spans


def test_runs_fold_and_singles_stay() -> None:
    assert spans([3, 0, 1, 2, 5, 7, 8]) == "0-3,5,7-8"
    assert spans([3, 0, 1, 2, 7, 5, 6]) == "0-3,5-7"
    assert spans([4]) == "4"
    assert spans([0, 2, 4]) == "0,2,4"
    assert spans([]) == ""


def test_ten_thousand_nodes_are_one_span() -> None:
    assert spans(range(1, 10_000)) == "1-9999"


def expand(text: str) -> Set[int]:
    numbers: Set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        numbers.update(range(int(low), int(high or low) + 1))
    return numbers


@settings(derandomize=True, max_examples=200)
@given(st.lists(st.integers(min_value=0, max_value=300), max_size=80))
def test_spans_name_exactly_the_numbers(numbers: List[int]) -> None:
    text = spans(numbers)
    assert expand(text) == set(numbers)
    parts = [part.split("-") for part in filter(None, text.split(","))]
    # Folded as far as it goes: no two parts touch, and each run is in order.
    for (*_, high), (low, *_) in zip(parts, parts[1:]):
        assert int(low) > int(high) + 1
