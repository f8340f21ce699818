"""CPU lists: the kernel's text form and ``--cpu-bind``'s value, over generated input."""

from __future__ import annotations

from typing import FrozenSet, List

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from malaunch.cpus.cpulist import (
    EXPECTED,
    MAX_CPU,
    expand,
    format_cpulist,
    parse_cpu_bind,
    parse_cpulist,
)
from malaunch.errors import UsageError

PROPERTY = settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
CPU_SETS = st.frozensets(st.integers(0, 300), min_size=1, max_size=40)


def test_kernel_lists() -> None:
    assert parse_cpulist("0-23,48-71\n") == frozenset([*range(24), *range(48, 72)])
    assert parse_cpulist("\n") == frozenset()  # a memory-only NUMA node
    assert format_cpulist([3, 1, 2, 7, 0]) == "0-3,7"
    assert format_cpulist([]) == ""
    with pytest.raises(ValueError, match="'0-' is not a CPU number or range"):
        parse_cpulist("0-")


@PROPERTY
@given(CPU_SETS)
def test_formatting_round_trips(cpus: FrozenSet[int]) -> None:
    text = format_cpulist(cpus)
    assert parse_cpulist(text) == cpus
    assert format_cpulist(parse_cpulist(text)) == text  # the shortest form is stable


def _bind_text(data: st.DataObject, sets: List[FrozenSet[int]]) -> str:
    """Per-process lists written any valid way: ranges split, shuffled, overlapping."""
    entries = []
    for cpus in sets:
        pieces = format_cpulist(cpus).split(",")
        pieces = data.draw(st.permutations(pieces))
        if data.draw(st.booleans()):
            pieces = [*pieces, pieces[0]]  # an overlap is allowed
        entries.append(":".join(pieces))
    return ",".join(entries)


@PROPERTY
@given(st.data(), st.lists(CPU_SETS, min_size=1, max_size=12))
def test_generated_lists_parse_to_their_sets(
    data: st.DataObject, sets: List[FrozenSet[int]]
) -> None:
    text = _bind_text(data, sets)
    mode = parse_cpu_bind(text, "--cpu-bind")
    assert mode.name == "list"
    assert [expand(intervals) for intervals in mode.lists] == sets


HOSTILE = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789-,: _\n\u0661x", max_size=40),
    st.just("9" * 5000),
    st.builds(lambda n: f"0-{n}", st.integers(MAX_CPU + 1, 10**30)),
)


@PROPERTY
@given(HOSTILE)
@example("0,,1")
@example("3-1")
@example(",".join(["0"] * 10_001))
@example("1" + "-1" * 1000)
def test_any_text_is_a_mode_or_one_usage_error_naming_the_option(text: str) -> None:
    try:
        mode = parse_cpu_bind(text, "--cpu-bind")
    except UsageError as exc:
        message = str(exc)
        assert message.startswith("--cpu-bind ")
        assert "\n" not in message.replace("\\n", "")
        assert len(message) < 400
        return
    assert mode.name in ("none", "even", "numa", "list")
    for intervals in mode.lists:
        assert all(0 <= first <= last <= MAX_CPU for first, last in intervals)


def test_the_words_and_the_messages() -> None:
    assert parse_cpu_bind("numa", "--cpu-bind").name == "numa"
    with pytest.raises(UsageError) as info:
        parse_cpu_bind("Even", "MALAUNCH_CPU_BIND")
    assert str(info.value) == f"MALAUNCH_CPU_BIND 'Even': {EXPECTED}"
    with pytest.raises(UsageError) as info:
        parse_cpu_bind("0-3,4-x", "--cpu-bind")
    assert str(info.value) == (
        f"--cpu-bind '0-3,4-x': CPU list 2: '4-x' is not a CPU number or range; {EXPECTED}"
    )
    long = ",".join(str(n) for n in range(100)) + ",x"
    with pytest.raises(UsageError, match=r"\.\.\. \(291 characters\): CPU list 101"):
        parse_cpu_bind(long, "--cpu-bind")
