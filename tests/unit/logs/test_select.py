"""The filters and the printed form: --ranks, --nodes, --grep, --since, the prefix."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Optional

import pytest

from malaunch.errors import UsageError
from malaunch.logs.discover import RankLog
from malaunch.logs.reader import Block
from malaunch.logs.select import Selection, compile_grep, parse_since
from malaunch.rankspec import parse_rank_spec

NOW = 1_800_000_000.0


def rank_log(node: int, rank: Optional[int], role: str = "worker") -> RankLog:
    return RankLog(node, 0, Path("x"), role, rank, 0 if rank is None else rank)


def block(text: str, time: Optional[float] = 10.0, node: int = 0, rank: int = 1) -> Block:
    return Block(time, (node, "", 0), 1, rank_log(node, rank), text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("2h", 7200), ("1d", 86400), ("90", 90), ("1.5m", 90)],
)
def test_since_a_duration_counts_back_from_now(text: str, seconds: float) -> None:
    assert parse_since(text, NOW) == NOW - seconds


def test_since_an_iso_time() -> None:
    assert parse_since("2027-01-15T08:00:00Z", NOW) == 1_800_000_000.0  # is 08:00 UTC
    assert parse_since("2027-01-15T10:00:00+02:00", NOW) == 1_800_000_000.0
    local = datetime.datetime(2027, 1, 15, 8, 0, 0).timestamp()
    assert parse_since("2027-01-15T08:00:00", NOW) == local
    assert parse_since("2027-01-15 08:00", NOW) == local


@pytest.mark.parametrize(
    "text", ["yesterday", "5 m", "-5m", "5w", "nan", "inf", "1e3", "\u0661s", "", "2027-13-01",
             "99999999999d", "٢٠٢٧-01-15"],
)  # fmt: skip
def test_a_bad_since_is_a_usage_error_naming_the_option(text: str) -> None:
    with pytest.raises(UsageError, match=r"^--since "):
        parse_since(text, NOW)


def test_a_bad_grep_is_a_usage_error_naming_the_option() -> None:
    with pytest.raises(UsageError, match=r"^--grep '\(': not a regular expression"):
        compile_grep("(")


def test_ranks_and_nodes_choose_logs() -> None:
    chosen = Selection(ranks=parse_rank_spec("0,3-4", "--ranks"), nodes=parse_rank_spec("1", "-"))
    assert chosen.wants(rank_log(1, 3))
    assert not chosen.wants(rank_log(0, 3))
    assert not chosen.wants(rank_log(1, 2))
    assert not chosen.wants(rank_log(1, None, "ps"))  # no rank: only with --ranks all
    assert Selection().wants(rank_log(5, None, "scheduler"))


def test_every_line_gets_the_prefix() -> None:
    assert (
        Selection().render(block("a\n\nb\n"))
        == "[node 0 rank 1] a\n[node 0 rank 1] \n[node 0 rank 1] b\n"
    )


def test_grep_keeps_the_lines_it_finds_and_never_sees_the_prefix() -> None:
    chosen = Selection(grep=compile_grep("^(loss|node)"))
    assert chosen.render(block("loss 1\nacc\nloss 2\n")) == (
        "[node 0 rank 1] loss 1\n[node 0 rank 1] loss 2\n"
    )
    assert chosen.render(block("nothing\n")) == ""


def test_since_drops_earlier_blocks_and_those_without_a_time() -> None:
    chosen = Selection(since=10.0)
    assert chosen.render(block("x\n", time=10.0)) == "[node 0 rank 1] x\n"
    assert chosen.render(block("x\n", time=9.99)) == ""
    assert chosen.render(block("x\n", time=None)) == ""


def test_terminal_controls_show_as_text_unless_raw() -> None:
    """OSC 52 and a forged launcher line, as `malaunch logs` prints them; --raw keeps them."""
    text = "\x1b]52;c;aGk=\x07\x1b[31mred\x1b[0m\n50%\rmalaunch: error: forged\n"
    assert Selection().render(block(text)) == (
        "[node 0 rank 1] \\x1b]52;c;aGk=\\x07\x1b[31mred\x1b[0m\n"
        "[node 0 rank 1] 50%\r[node 0 rank 1] malaunch: error: forged\n"
    )
    chosen = Selection(grep=compile_grep("forged"))
    assert chosen.render(block(text)) == (
        "[node 0 rank 1] 50%\r[node 0 rank 1] malaunch: error: forged\n"
    )
    assert Selection(raw=True).render(block(text)) == (
        "[node 0 rank 1] \x1b]52;c;aGk=\x07\x1b[31mred\x1b[0m\n"
        "[node 0 rank 1] 50%\rmalaunch: error: forged\n"
    )
