"""Escaping what a terminal would obey in text it is only meant to show.

A rank's output is data: dataset text, a library's progress bar, a binary printed by mistake.
Shown raw, part of it is a command to the terminal: OSC 52 writes the clipboard, OSC 0 sets
the window title, a CSI moves the cursor over the ``[rank N]`` prefix, and
``\\rmalaunch: error: ...`` forges a line of the launcher. :func:`escape_text` turns every such
control into visible text (``\\x1b``, ``\\x07``, ``\\x9b``) and keeps only:

- SGR, ``ESC [ params m`` with params of digits, ``;`` and ``:``: colour and bold;
- ``\\t`` and ``\\n``;
- ``\\r``, followed by the line's prefix again: a progress bar still redraws its line, but no
  text can be written in front of the prefix.

Escaped are the other C0 controls and DEL, ESC starting anything but SGR (OSC, DCS, APC, PM,
SOS, CSI other than SGR, single-character escapes), and the C1 controls U+0080-U+009F, also as
the raw bytes 0x80-0x9f where they are not part of valid UTF-8 (an 8-bit terminal obeys them).
Printable text, valid or not as UTF-8, is left as it is.

:func:`escape_bytes` is the byte form the console relay uses; :func:`is_plain` is its C-level
fast path (``bytes.translate``, ``isascii``): output without a control costs almost nothing.
"""

from __future__ import annotations

import re
from typing import Match

SGR_MAX = 100  # characters of an SGR's parameters: 24-bit colours for both planes fit

# The controls to escape. A bare ESC is escaped unless an SGR follows; \t \n \r are handled
# apart. \udc80-\udc9f are the raw bytes 0x80-0x9f that were not valid UTF-8 (surrogateescape).
_CONTROL = re.compile(
    rf"\x1b(?!\[[0-9;:]{{0,{SGR_MAX}}}m)"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f-\x9f\udc80-\udc9f]"
)
# Bytes that need a closer look: the C0 controls (ESC and \r among them) and DEL.
_C0 = bytes(range(0x09)) + bytes(range(0x0B, 0x20)) + b"\x7f"
_C1_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")  # U+0080-U+009F as UTF-8: \xc2 only ever leads


def _shown(match: Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00 if code >= 0xDC00 else code:02x}"


def escape_text(text: str, prefix: str = "") -> str:
    """``text`` with every control a terminal would obey, except SGR colour, ``\\t`` and
    ``\\n``, shown as ``\\xNN``; each ``\\r`` is followed by ``prefix`` (the line's prefix).

    ``text`` may hold the raw bytes of invalid UTF-8 as surrogates (``surrogateescape``).
    """
    escaped = _CONTROL.sub(_shown, text)
    if "\r" in escaped:
        escaped = escaped.replace("\r", "\r" + prefix)
    return escaped


def is_plain(data: bytes) -> bool:
    """Whether ``data`` holds no control at all (``\\t`` and ``\\n`` are fine): it then shows
    as it is. Valid UTF-8 only; anything else takes the careful path."""
    if len(data.translate(None, _C0)) != len(data):
        return False
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\xc2" not in data or _C1_UTF8.search(data) is None


def escape_bytes(data: bytes, prefix: bytes = b"") -> bytes:
    """:func:`escape_text` for bytes (the console relay): ``data`` itself when it is plain."""
    if is_plain(data):
        return data
    text = data.decode("utf-8", "surrogateescape")
    shown = escape_text(text, prefix.decode("utf-8", "surrogateescape"))
    return shown.encode("utf-8", "surrogateescape")
