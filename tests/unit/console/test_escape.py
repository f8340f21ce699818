"""Terminal escaping (malaunch.console.escape): what a terminal would obey shows as text.

The guarantee covers every byte string, so the cases are generated: for arbitrary bytes the
output holds no ESC but SGR colour, no C0 control but tab, newline and a carriage return
followed by the prefix, no C1 control (as a character or as a raw byte outside valid UTF-8),
and every printable character of the input, in order.
"""

from __future__ import annotations

import random
import re
from typing import List

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from malaunch.console import escape_bytes, escape_text, is_plain
from malaunch.supervisor.output import LineRelay

PROPERTY = settings(
    max_examples=400,
    deadline=None,
    database=None,  # no .hypothesis directory in the work tree
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
PREFIX = b"[rank 3] "
SGR = re.compile(r"\x1b\[[0-9;:]{0,100}m")
# Pieces that make the interesting cases likely: sequences, C1 as UTF-8 and as raw bytes.
PIECES = st.sampled_from(
    [
        b"\x1b", b"\x1b[", b"\x1b[31m", b"\x1b[0m", b"\x1b[38;2;1;2;3m", b"\x1b[2J", b"\x1b[H",
        b"\x1b]52;c;aGk=\x07", b"\x1b]0;title\x1b\\", b"\x1bP1$r\x1b\\", b"\x1b_apc\x1b\\",
        b"\x1b^pm\x1b\\", b"\x07", b"\x08", b"\r", b"\n", b"\t", b"\x7f", b"\x00", b"\x9b",
        b"\xc2\x9b", b"\xc2\x85", b"\x9d", b"\xe4\xb8\xad", b"\xe4\xb8", b"\xff", b"\xc2",
        b"malaunch: error: forged", b"plain text ", b"\\x1b",
    ]
)  # fmt: skip
HOSTILE = st.lists(st.one_of(PIECES, st.binary(max_size=12)), max_size=30).map(b"".join)


def assert_terminal_safe(out: bytes, prefix: bytes = PREFIX) -> None:
    """What a terminal may be given: the rule of the module's docstring, checked on ``out``."""
    text = out.decode("utf-8", "surrogateescape")
    shown_prefix = prefix.decode("utf-8", "surrogateescape")
    for index, char in enumerate(text):
        code = ord(char)
        if char == "\x1b":
            assert SGR.match(text, index), f"ESC not starting an SGR at {index}: {text!r}"
        elif char == "\r":
            assert text.startswith(shown_prefix, index + 1), f"\\r without prefix: {text!r}"
        elif code < 0x20 or code == 0x7F:
            assert char in "\t\n", f"C0 control {char!r} in {text!r}"
        assert not 0x80 <= code <= 0x9F, f"C1 control {char!r} in {text!r}"
        assert not 0xDC80 <= code <= 0xDC9F, f"raw C1 byte {char!r} in {text!r}"


def printable(data: bytes) -> List[str]:
    return [c for c in data.decode("utf-8", "surrogateescape") if c.isprintable()]


def is_subsequence(needle: List[str], haystack: str) -> bool:
    chars = iter(haystack)
    return all(any(c == wanted for c in chars) for wanted in needle)


@PROPERTY
@given(st.one_of(HOSTILE, st.binary(max_size=200)))
@example(b"\x1b]52;c;ZWNobyBwd25lZA==\x07")  # OSC 52: write the clipboard
@example(b"\x1b]0;pwned\x07")  # the window title
@example(b"step 1\rmalaunch: error: forged")  # a line of the launcher, forged
@example(b"\x9b2J\xc2\x9b2J")  # 8-bit CSI, raw and as UTF-8
def test_arbitrary_bytes_come_out_terminal_safe_with_their_printable_text(data: bytes) -> None:
    out = escape_bytes(data, PREFIX)
    assert_terminal_safe(out)
    assert is_subsequence(printable(data), out.decode("utf-8", "surrogateescape"))


@PROPERTY
@given(
    st.text(
        st.characters(blacklist_categories=("Cc", "Cs"), whitelist_characters="\t\n"),
        max_size=200,
    )
)
def test_text_without_controls_is_unchanged(text: str) -> None:
    data = text.encode("utf-8")
    assert is_plain(data)  # the relay's fast path: no copy, no decoding
    assert escape_bytes(data, PREFIX) is data
    assert escape_text(text, "> ") == text


@PROPERTY
@given(st.lists(st.sampled_from(["\x1b[1m", "\x1b[38;5;208m", "\x1b[0m", "loss ", "中"])))
def test_colour_passes_through(pieces: List[str]) -> None:
    text = "".join(pieces)
    assert escape_text(text) == text


def test_what_each_control_turns_into() -> None:
    assert escape_bytes(b"\x1b]0;t\x07 \x1b[2J\x08\x9b\xc2\x85", b"> ") == (
        b"\\x1b]0;t\\x07 \\x1b[2J\\x08\\x9b\\x85"
    )
    assert escape_bytes(b"10%\r20%\r\n", b"> ") == b"10%\r> 20%\r> \n"
    assert escape_bytes(b"\xff \xe4\xb8\xad", b"> ") == b"\xff \xe4\xb8\xad"  # not controls


@PROPERTY
@given(HOSTILE, st.lists(st.integers(1, 40), min_size=1, max_size=10), st.booleans())
def test_the_relay_is_terminal_safe_whatever_the_chunks(
    data: bytes, sizes: List[int], chatty: bool
) -> None:
    """Lines cut anywhere (a 64 KiB read ends inside a sequence or a character) come out the
    same as in one piece, safe, every line behind its prefix."""
    if chatty:  # plain lines around, so the relay's fast path is taken for some chunks
        data = b"ok line\n" * 3 + data + b"\nmore plain output\n"
    whole: List[bytes] = []
    LineRelay(PREFIX, whole.append).feed(data + b"\n")
    cut: List[bytes] = []
    relay = LineRelay(PREFIX, cut.append)
    position, rng = 0, random.Random(len(data))
    while position < len(data):
        size = sizes[rng.randrange(len(sizes))]
        relay.feed(data[position : position + size])
        position += size
    relay.feed(b"\n")
    assert b"".join(cut) == b"".join(whole)
    out = b"".join(whole)
    assert_terminal_safe(out)
    assert all(line.startswith(PREFIX) for line in out.split(b"\n")[:-1])


def test_the_relay_passes_everything_raw_when_asked() -> None:
    out: List[bytes] = []
    LineRelay(PREFIX, out.append, escape=False).feed(b"\x1b]0;t\x07\rx\n")
    assert out == [PREFIX + b"\x1b]0;t\x07\rx\n"]
