"""Counts, runs of numbers and suggestions, worded alike everywhere (malaunch.wording)."""

from __future__ import annotations

from typing import List

from hypothesis import given, settings
from hypothesis import strategies as st

from malaunch.rankspec import parse_rank_spec
from malaunch.wording import (
    closest,
    did_you_mean,
    first_of,
    plural,
    quoted,
    ranks,
    shortened,
    spans,
    waited_nodes,
)


def test_plural_agrees_with_its_count() -> None:
    assert [plural(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert [plural(n, "process") for n in (1, 3)] == ["1 process", "3 processes"]
    assert plural(2, "other process") == "2 other processes"
    assert plural(2, "retry") == "2 retries"
    assert plural(2, "is", "are") == "2 are"


@settings(derandomize=True, max_examples=300)
@given(st.lists(st.integers(0, 200), min_size=1, max_size=40))
def test_spans_name_exactly_the_numbers_folded(numbers: List[int]) -> None:
    text = spans(numbers)
    parsed = parse_rank_spec(text, "--ranks")
    assert parsed.intervals is not None
    assert sorted({n for a, b in parsed.intervals for n in range(a, b + 1)}) == sorted(set(numbers))
    # every run is folded: no two intervals touch
    assert all(b + 1 < c for (_, b), (c, _) in zip(parsed.intervals, parsed.intervals[1:]))


def test_ranks_say_their_noun_once_per_count() -> None:
    assert ranks([3]) == "rank 3"
    assert ranks([0, 1, 2, 3, 5]) == "ranks 0-3,5"
    assert ranks([1, 1], "node") == "node 1"


def test_one_suggestion_or_none() -> None:
    names = ["--hang-timeout", "--wait-timeout", "--framework", "--num-workers"]
    assert closest("--framwork", names) == "--framework"
    assert closest("--timeout", names) is None  # two as close: none named
    assert closest("--zzz", names) is None
    assert closest("--framework", names) is None  # nothing to correct
    assert did_you_mean("pytorch", ["torch_ddp", "mindspore"]) == " (did you mean torch_ddp?)"
    assert did_you_mean("check", ["convert", "validate"], "`x {}`") == ""


def test_nodes_waited_for_are_named_then_counted_and_cut_short() -> None:
    assert waited_nodes([1, 2]) == "node 1, 2"
    assert waited_nodes(list(range(1, 9))) == "node 1, 2, 3, 4, 5, 6, 7, 8"
    assert waited_nodes(list(range(1, 20))) == "19 nodes: 1-19"
    every_other = list(range(1, 10_000, 2))
    text = waited_nodes(every_other)
    assert text.startswith("5,000 nodes: 1,3,5,") and text.endswith(",...")
    assert len(text) < 230


def test_a_long_value_is_cut_short_with_its_length() -> None:
    assert shortened("x" * 60) == "x" * 60
    assert shortened("x" * 61) == "x" * 40 + "... (61 characters)"
    assert shortened("abcdef", limit=4, keep=2) == "ab... (6 characters)"
    assert quoted("a'b") == '"a\'b"'
    assert quoted("y" * 61) == repr("y" * 60) + "... (61 characters)"
    assert quoted("y" * 201, limit=200, keep=60) == repr("y" * 60) + "... (201 characters)"


@settings(derandomize=True, max_examples=200)
@given(st.text(max_size=300), st.integers(1, 120))
def test_a_cut_value_is_bounded_and_starts_as_the_value(text: str, limit: int) -> None:
    keep = limit // 2 + 1
    cut = shortened(text, limit, keep)
    assert cut == text if len(text) <= limit else cut.startswith(text[:keep] + "... (")
    assert len(cut) <= limit + len("... (300 characters)")


def test_a_long_list_names_its_first_items_and_counts_the_rest() -> None:
    assert first_of(["a", "b"], 3) == "a, b"
    assert first_of(["a", "b", "c"], 3) == "a, b, c"
    assert first_of(["a", "b", "c", "d", "e"], 3) == "a, b, c, ... (2 more)"
