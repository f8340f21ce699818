"""A failed process's structured error: the torchelastic error file its ``@record`` wrote.

``torch.distributed.elastic.multiprocessing.errors.record`` writes, when the function it wraps
raises, ``{"message": {"message": "<Type>: <text>", "extraInfo": {"py_callstack": "<the
traceback>", "timestamp": "<seconds>"}}}`` to ``TORCHELASTIC_ERROR_FILE`` (torchrun's agent
copies it with an ``errorCode`` added; a newer form has ``message`` as text and ``timestamp``
beside it). torchrun shows it in its ``ChildFailedError`` table; malaunch puts it in the
summary of every node (``error``: ``type``, ``message``, ``frame`` and ``code``, the
traceback's last frame and its source line, ``timestamp``, ``file``).

The file is the process's output, so it is read as untrusted input: a bounded regular file
(never a FIFO that would block), through the one JSON parser, every field checked and cut to
a few lines, and anything else ignored with one warning.
"""

from __future__ import annotations

import datetime
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from malaunch.files import read_regular
from malaunch.jsontext import loads
from malaunch.log import logger, shown

MAX_FILE = 1 << 20  # bytes: a traceback of a few thousand lines fits
MAX_MESSAGE = 2000  # characters of the exception's text kept
MAX_LINE = 400  # characters of the frame and of its source line kept
MAX_TIMESTAMP = 2**37  # seconds (year 6325): past this a timestamp is not one
_FRAME = re.compile(r'\s*File "(?P<file>.*)", line (?P<line>\d+), in (?P<function>.*)')
_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")

Error = Dict[str, Any]


def read_error_file(path: Optional[str]) -> Optional[Error]:
    """The structured error in ``path``, or None when there is none (no file: the process
    did not use ``@record``, or it died of a signal) or it cannot be read (a warning)."""
    if path is None:
        return None
    try:
        document = _load(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        logger.warning(f"error file {shown(path)}: {why[:200]}; not shown in the summary")
        return None
    error = parse_error(document)
    if error is None:
        logger.warning(f"error file {shown(path)}: not torchelastic's error format; ignored")
        return None
    return {**error, "file": path}


def _load(path: str) -> object:
    raw = read_regular(path, MAX_FILE)
    try:
        return loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except ValueError as exc:  # bad syntax, or past a limit: jsontext says which
        raise ValueError(f"not JSON ({exc})") from None


def parse_error(document: object) -> Optional[Error]:
    """``type``, ``message``, ``frame``, ``code`` and ``timestamp`` of an error document,
    or None when it is not torchelastic's format."""
    if not isinstance(document, dict):
        return None
    message = document.get("message")
    if isinstance(message, dict):
        text, extra = message.get("message"), message.get("extraInfo")
        extra = extra if isinstance(extra, dict) else {}
        stack, stamp = extra.get("py_callstack"), extra.get("timestamp")
    elif isinstance(message, str):
        text, stack, stamp = message, None, document.get("timestamp")
    else:
        return None
    if not isinstance(text, str):
        return None
    kind, said = split_message(text)
    frame, code = last_frame(stack) if isinstance(stack, str) else (None, None)
    return {
        "type": kind,
        "message": _cut(said, MAX_MESSAGE),
        "frame": frame,
        "code": code,
        "timestamp": _timestamp(stamp),
    }


def split_message(text: str) -> Tuple[Optional[str], str]:
    """``("ValueError", "boom")`` from ``"ValueError: boom"`` (what ``@record`` writes);
    ``(None, text)`` when the text does not start with a type name."""
    head, sep, rest = text.partition(": ")
    if not sep and text.endswith(":"):  # "ValueError: " with an empty str(e), stripped
        head, sep, rest = text[:-1], ":", ""
    if sep and len(head) <= MAX_LINE and _TYPE.fullmatch(head):
        return head, rest
    return None, text


def last_frame(stack: str) -> Tuple[Optional[str], Optional[str]]:
    """The traceback's last ``File "...", line N, in f`` line and the source line under it
    (None when it shows none); a chained exception's last frame is the one raised last."""
    lines = stack[-(MAX_FILE // 4) :].splitlines()
    for index in range(len(lines) - 1, -1, -1):
        if _FRAME.fullmatch(lines[index]):
            code = _source_line(lines[index + 1 : index + 2])
            return _cut(lines[index].strip(), MAX_LINE), code
    return None, None


def _source_line(following: List[str]) -> Optional[str]:
    """The line under a frame when it shows the source (indented deeper, not a marker)."""
    if not following or not following[0].startswith("    "):
        return None
    code = following[0].strip()
    if not code or set(code) <= {"^", "~", " "}:
        return None
    return _cut(code, MAX_LINE)


def _timestamp(value: object) -> Optional[str]:
    """Seconds since the epoch (a number or digits, as torch writes it) as ISO 8601."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip()) if len(value.strip()) < 15 else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not 0 <= value < MAX_TIMESTAMP:
        return None
    moment = datetime.datetime.fromtimestamp(value, tz=datetime.timezone.utc)
    return moment.astimezone().isoformat(timespec="seconds")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_lines(error: Mapping[str, Any]) -> List[str]:
    """The structured error as the console summary shows it, traceback style: the exception
    and when, then where it was raised (values as read: the console escapes what is not
    printable)."""
    kind, message = error.get("type"), error.get("message") or ""
    head = f"{kind}: {message}" if kind else str(message)
    lines = [f"{head} (at {error['timestamp']})" if error.get("timestamp") else head]
    if error.get("frame"):
        lines.append(str(error["frame"]))
        if error.get("code"):
            lines.append(f"    {error['code']}")
    return lines
