"""The one place that writes text for a shell: every word quoted, every line one line.

What malaunch prints for a person to paste or a script to source (``simulate --print-env``'s
``NAME=value`` lines and launcher commands) is built here, so that no value, whatever it
holds (``$(...)``, backticks, ``;``, quotes, spaces, a newline), runs anything or becomes a
second variable.

A word of printable text is quoted by :func:`shlex.quote` (POSIX: every shell reads it). A word
holding a character that cannot stand on a line as it is (a newline or another control
character, or a byte that is not UTF-8, which Python keeps as a lone surrogate) is written in
``$'...'`` form (bash, zsh, ksh, busybox sh and POSIX.1-2024 read it), with those characters as
``\\xHH`` escapes and ``'`` as ``\\x27``, so that the line stays one line and a shell without
``$'...'`` (dash before 0.5.13) still reads one harmless single-quoted word. NUL has no shell
form (no environment value or argument can hold it) and is refused with a ``ValueError``.
"""

from __future__ import annotations

import re
import shlex
from typing import Iterable

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
# C0 controls, DEL, C1 controls and lone surrogates: written as escapes.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "'": "\\x27", "\\": "\\\\"}


def is_name(text: str) -> bool:
    """Whether ``text`` is a shell variable name: ASCII letters, digits and ``_``, no digit
    first."""
    return _NAME.fullmatch(text) is not None


def quote(word: str) -> str:
    """``word`` as one shell word on one line, read back by the shell exactly."""
    if "\x00" in word:
        msg = "a shell word cannot hold NUL"
        raise ValueError(msg)
    if _UNPRINTABLE.search(word) is None:
        return shlex.quote(word)
    return "$'" + "".join(_escape(char) for char in word) + "'"


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if _UNPRINTABLE.fullmatch(char) is None:
        return char
    try:  # a lone surrogate is a byte that was not UTF-8 (surrogateescape): that byte again
        data = char.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as exc:
        msg = f"a shell word cannot hold {char!r}, which stands for no byte"
        raise ValueError(msg) from exc
    return "".join(f"\\x{byte:02x}" for byte in data)


def command_line(argv: Iterable[str]) -> str:
    """A command as one line a shell runs as exactly these arguments."""
    return " ".join(quote(word) for word in argv)


def assignment(name: str, value: str) -> str:
    """``NAME=value`` as one line: ``set -a; . FILE`` exports exactly ``value``.

    Raises ``ValueError`` for a name that is not a shell name (the shell would run the line as
    a command, or split it): the caller names the variable in its error.
    """
    if not is_name(name):
        msg = (
            f"{name!r} is not a shell variable name (ASCII letters, digits and '_', no digit first)"
        )
        raise ValueError(msg)
    return f"{name}={quote(value)}"
