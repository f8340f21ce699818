"""``--grep`` runs RE2: linear time whatever the pattern, a one-line refusal naming the option
for what RE2 cannot run, and the lines Python's ``re`` finds for every pattern both read."""

from __future__ import annotations

import re
from typing import List

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from malaunch.errors import UsageError
from malaunch.logs.select import Grep, compile_grep

UNSUPPORTED = (
    "--grep runs RE2, in time linear in the line, which has no backreferences or lookaround"
)


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", r"invalid escape sequence: \1"),
        (r"(?P<x>a)(?P=x)", "invalid perl operator: (?P"),
        ("(?=a)", "invalid perl operator: (?="),
        ("(?!a)b", "invalid perl operator: (?!"),
        ("(?<=a)b", "invalid perl operator: (?<="),
        ("(?<!a)b", "invalid perl operator: (?<!"),
        ("a++", "bad repetition operator: ++"),
        ("(?>a)", "invalid perl operator: (?>"),
        ("a{1001}", "invalid repetition size: {1001}"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_saying_so(pattern: str, reason: str) -> None:
    with pytest.raises(UsageError) as raised:
        compile_grep(pattern)
    assert str(raised.value) == (
        f"--grep {pattern!r}: RE2 does not support this pattern ({reason}); {UNSUPPORTED}"
    )


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(", "missing ): ("),
        ("[a", "missing ]: [a"),
        ("a)", "unexpected ): a)"),
        ("*", "no argument for repetition operator: *"),
    ],
)
def test_what_is_no_regular_expression_is_refused_as_such(pattern: str, reason: str) -> None:
    with pytest.raises(UsageError) as raised:
        compile_grep(pattern)
    assert str(raised.value) == f"--grep {pattern!r}: not a regular expression ({reason})"


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(UsageError) as raised:
        compile_grep("a\udcff")
    assert str(raised.value) == (
        "--grep 'a\\udcff': not UTF-8 text (bytes that decode to no character)"
    )


@pytest.mark.parametrize(
    "pattern",
    ["(a+)+$", "(a|aa)+$", "(a*)*b", "^(a|a?)+$", "(.*a){20}$", "(\\w+\\s?)+$", "(a|b|ab)*c"],
)
def test_catastrophic_patterns_finish_on_long_lines(pattern: str) -> None:
    """Each takes exponential time in Python's re on a line of a few dozen characters; here
    100,000 (bounded by the test's timeout, not timed)."""
    long = "a" * 100_000 + "!"
    text = f"{long}\n{long}\nshort\n"
    assert Grep(pattern).lines(text) == [
        line for line in text.split("\n")[:-1] if line == "short" and re.search(pattern, line)
    ]


def test_lines_found_are_whole_lines_whatever_the_block() -> None:
    grep = compile_grep("b")
    assert grep.lines("a\nab\nc\nb\n") == ["ab", "b"]
    assert compile_grep("x*").lines("a\n\nb\n") == ["a", "", "b"]
    assert compile_grep("^$").lines("a\n\nb\n") == [""]
    assert compile_grep(r"\Ab").lines("a\nb\nab\n") == ["b"]  # \A: each line's start
    assert compile_grep("é|\U0001f600").lines("aé\n\ufffd\nx\U0001f600\n") == ["aé", "x\U0001f600"]
    dense = "".join(f"line {index}\n" for index in range(100))
    assert compile_grep("[02468]$").lines(dense) == [f"line {i}" for i in range(0, 100, 2)]
    assert compile_grep("9$").lines(dense) == [f"line {i}" for i in range(9, 100, 10)]


# Patterns in the syntax Python and RE2 share, ASCII literals (RE2's \d \w \s \b are ASCII:
# Python's are compared with re.ASCII).
ATOMS = st.sampled_from(
    ["a", "b", "c", "0", "1", " ", "-", "_", r"\.", ".", "[ab]", "[^a]", "[a-c0]", r"\d", r"\w",
     r"\s", r"\W", r"\D", "^", "$", r"\b", r"\B", r"\A", "é", "\U0001f600"]
)  # fmt: skip
QUANTIFIERS = st.sampled_from(["*", "+", "?", "*?", "+?", "{1,2}", "{0,3}", "{2}"])


def _combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, inner).map("".join),
        st.tuples(inner, inner).map(lambda pair: f"(?:{pair[0]}|{pair[1]})"),
        st.tuples(inner, QUANTIFIERS).map(lambda pair: f"(?:{pair[0]}){pair[1]}"),
        inner.map(lambda text: f"({text})"),
    )


PATTERNS = st.tuples(
    st.sampled_from(["", "(?i)", "(?s)"]), st.recursive(ATOMS, _combine, max_leaves=6)
).map("".join)
# Lines of log text: no newline (lines are cut there), no \v (RE2's \s leaves it out).
LINES = st.lists(
    st.text(st.sampled_from(list("abcABC01 ._-\té\U0001f600\ufffd\x1b")), max_size=10),
    min_size=1,
    max_size=12,
)


@settings(max_examples=500, derandomize=True, deadline=None)
@given(pattern=PATTERNS, lines=LINES)
def test_re2_finds_the_lines_python_finds(pattern: str, lines: List[str]) -> None:
    try:
        python = re.compile(pattern, re.ASCII)
        grep = compile_grep(pattern)
    except (re.error, UsageError):
        assume(False)
        raise
    if r"\B" in pattern:
        # RE2 reads UTF-8 bytes, and its \B also matches between two bytes of one character;
        # Python before 3.14 never finds \B in an empty line (docs/logs.md).
        lines = [line for line in lines if line and line.isascii()]
    expected = [line for line in lines if python.search(line)]
    assert grep.lines("".join(f"{line}\n" for line in lines)) == expected
    assert [line for line in lines if grep.search(line)] == expected


# RE2's own syntax too (Unicode classes, POSIX classes, any byte, \z, flags turned off,
# ungreedy, quoted text): the block search and the search line by line agree.
RE2_ATOMS = st.sampled_from(
    [r"\pL", r"\PN", r"\p{Greek}", "[[:alpha:]]", "[[:^digit:]]", r"\C", r"\z", r"\Qa.\E",
     "(?-m:^a)", "(?U)a+", "(?m)$", "x", "[^x]", r"\s", "$", "^"]
)  # fmt: skip
RE2_PATTERNS = st.recursive(st.one_of(ATOMS, RE2_ATOMS), _combine, max_leaves=5)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(pattern=RE2_PATTERNS, lines=LINES)
def test_the_block_search_finds_what_each_line_alone_finds(pattern: str, lines: List[str]) -> None:
    try:
        grep = compile_grep(pattern)
    except UsageError:
        assume(False)
        raise
    text = "".join(f"{line}\n" for line in lines)
    assert grep.lines(text) == [line for line in lines if grep.search(line)]
