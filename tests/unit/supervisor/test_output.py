"""Console-rank selection and whole-line relaying, without processes."""

from __future__ import annotations

import random
from typing import FrozenSet, List, Optional

import pytest
from jobs import Job

from malaunch.errors import UsageError
from malaunch.supervisor.output import (
    MAX_PARTIAL_LINE,
    LineRelay,
    check_prefix_template,
    console_prefix,
    describe,
    parse_console_ranks,
)


@pytest.mark.parametrize(
    ("spec", "ranks"),
    [
        ("all", None),
        ("ALL", None),
        ("none", frozenset()),
        ("0,3-5", frozenset({0, 3, 4, 5})),
        (" 2 , 7 ", frozenset({2, 7})),
        ("4-4", frozenset({4})),
    ],
)
def test_parse_console_ranks(spec: str, ranks: Optional[FrozenSet[int]]) -> None:
    parsed = parse_console_ranks(spec).ranks
    assert parsed.everything == (ranks is None)
    if ranks is not None:
        assert {rank for rank in range(100) if rank in parsed} == ranks


def test_huge_ranges_are_not_expanded() -> None:
    parsed = parse_console_ranks("3-9999999").ranks
    assert 9999999 in parsed and 2 not in parsed and 10**7 not in parsed


def test_selection_by_rank(job: Job) -> None:
    chosen = parse_console_ranks("1")
    assert chosen.selects(job.spec(1))
    assert not chosen.selects(job.spec(2))
    assert not chosen.selects(job.spec(None, role="scheduler"))
    assert parse_console_ranks("all").selects(job.spec(None, role="scheduler"))


def test_names_and_prefixes(job: Job) -> None:
    assert describe(job.spec(3)) == "rank 3"
    assert describe(job.spec(0, role="ps")) == "ps 0"
    assert console_prefix(job.spec(None, role="scheduler")) == b"[scheduler] "
    assert console_prefix(job.spec(12)) == b"[rank 12] "


def test_relay_writes_whole_lines_only() -> None:
    out: List[bytes] = []
    relay = LineRelay(b"[rank 1] ", out.append)
    relay.feed(b"one\ntw")
    relay.feed(b"o")
    relay.feed(b"\nthree\nfo")
    assert out == [b"[rank 1] one\n", b"[rank 1] two\n[rank 1] three\n"]
    relay.flush()
    assert out[-1] == b"[rank 1] fo\n"
    relay.flush()
    assert len(out) == 3  # nothing left to flush twice


def test_relay_keeps_empty_lines() -> None:
    out: List[bytes] = []
    LineRelay(b"> ", out.append).feed(b"\n\nx\n")
    assert out == [b"> \n> \n> x\n"]


def test_overlong_unfinished_line_goes_out_on_its_own() -> None:
    out: List[bytes] = []
    relay = LineRelay(b"> ", out.append)
    relay.feed(b"x" * (MAX_PARTIAL_LINE - 1))
    assert out == []
    relay.feed(b"yy")
    assert out == [b"> " + b"x" * (MAX_PARTIAL_LINE - 1) + b"yy\n"]


@pytest.mark.parametrize("seed", range(5))
def test_relay_output_is_independent_of_chunking(seed: int) -> None:
    rng = random.Random(seed)
    text = (
        b"".join(b"line %d %s\n" % (i, b"x" * rng.randrange(0, 50)) for i in range(500)) + b"tail"
    )
    out: List[bytes] = []
    relay = LineRelay(b"[rank 7] ", out.append)
    position = 0
    while position < len(text):
        size = rng.choice([1, 2, 7, 100, 4096])
        relay.feed(text[position : position + size])
        position += size
    relay.flush()
    expected = b"".join(b"[rank 7] " + line + b"\n" for line in text.split(b"\n"))
    assert b"".join(out) == expected
    assert all(block.endswith(b"\n") and block.startswith(b"[rank 7] ") for block in out)


def test_a_long_prefix_template_is_cut_short_in_its_refusal() -> None:
    template = "{host}" + "x" * 100 + "{nope}"
    with pytest.raises(UsageError) as info:
        check_prefix_template(template)
    shown = repr(template[:60] + f"... ({len(template)} characters)")
    assert str(info.value).startswith(f"--console-prefix {shown}: ")
