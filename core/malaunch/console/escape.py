"""Escaping what a terminal would obey in text it is only meant to show.

A rank's output is data: dataset text, a library's progress bar, a binary printed by mistake.
Shown raw, part of it is a command to the terminal: OSC 52 writes the clipboard, OSC 0 sets
the window title, a CSI moves the cursor over the ``[rank N]`` prefix, and
``\\rmalaunch: error: ...`` forges a line of the launcher. :func:`escape_bytes` turns every such
control into visible text (``\\x1b``, ``\\x07``, ``\\x9b``) and keeps only:

- SGR, ``ESC [ params m`` with params of digits, ``;`` and ``:``: colour and bold;
- ``\\t`` and ``\\n``;
- ``\\r``, followed by the line's prefix again: a progress bar still redraws its line, but no
  text can be written in front of the prefix.

Escaped are the other C0 controls and DEL, ESC starting anything but SGR (OSC, DCS, APC, PM,
SOS, CSI other than SGR, single-character escapes), and the C1 controls U+0080-U+009F, also as
the raw bytes 0x80-0x9f where they are not part of valid UTF-8 (an 8-bit terminal obeys them).
Printable text, valid or not as UTF-8, is left as it is.

:func:`escape_bytes` is the one function that escapes (the console relay and ``--console-dedup``
call it; :func:`escape_text` is its form for ``malaunch logs``). Which controls a chunk holds
is found first at C speed (``bytes.translate``, ``isascii``), so output without any costs
almost nothing, and coloured output or a progress bar skips the passes it does not need.
"""

from __future__ import annotations

import re
from typing import Match

SGR_MAX = 100  # characters of an SGR's parameters: 24-bit colours for both planes fit

# The controls to escape, in two passes that each scan at C speed (one alternation of both
# would try every position in Python's regex engine, 20 times slower on coloured output):
# every C0 control but ESC, \t, \n and \r, DEL and C1 (\udc80-\udc9f: raw bytes 0x80-0x9f
# that were not valid UTF-8, as surrogateescape gives them); then ESC unless an SGR follows.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f\udc80-\udc9f]")
_ESCAPE = re.compile(rf"\x1b(?!\[[0-9;:]{{0,{SGR_MAX}}}m)")
# What ``bytes.translate`` deletes to leave only a text's C0 controls (\t, \n aside) and DEL:
# which ones a chunk holds is known at C speed, before any regular expression runs.
_C0 = bytes(range(0x09)) + bytes(range(0x0B, 0x20)) + b"\x7f"
_NOT_C0 = bytes(sorted(set(range(256)) - set(_C0)))
_C1_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")  # U+0080-U+009F as UTF-8: \xc2 only ever leads


def _shown(match: Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00 if code >= 0xDC00 else code:02x}"


def escape_bytes(data: bytes, prefix: bytes = b"") -> bytes:
    """``data`` with every control a terminal would obey, except SGR colour, ``\\t`` and
    ``\\n``, shown as ``\\xNN``; each ``\\r`` is followed by ``prefix`` (the line's prefix).
    ``data`` itself when it holds no control (:func:`is_plain`)."""
    found = data.translate(None, _NOT_C0)
    c1 = not (data.isascii() or _utf8_without_c1(data))
    if not (found or c1):
        return data
    text = data.decode("utf-8", "surrogateescape")
    if c1 or found.translate(None, b"\x1b\r"):  # a control other than ESC and \r
        text = _CONTROL.sub(_shown, text)
    if b"\x1b" in found:
        text = _ESCAPE.sub(r"\\x1b", text)
    if b"\r" in found:
        text = text.replace("\r", "\r" + prefix.decode("utf-8", "surrogateescape"))
    return text.encode("utf-8", "surrogateescape")


def escape_text(text: str, prefix: str = "") -> str:
    """:func:`escape_bytes` for text (``malaunch logs``, whose logs are decoded already)."""
    data = text.encode("utf-8", "surrogateescape")
    shown = escape_bytes(data, prefix.encode("utf-8", "surrogateescape"))
    return text if shown is data else shown.decode("utf-8", "surrogateescape")


def is_plain(data: bytes) -> bool:
    """Whether ``data`` holds no control at all (``\\t`` and ``\\n`` are fine): it then shows
    as it is. Valid UTF-8 only; anything else takes the careful path."""
    return not data.translate(None, _NOT_C0) and (data.isascii() or _utf8_without_c1(data))


def _utf8_without_c1(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\xc2" not in data or _C1_UTF8.search(data) is None
