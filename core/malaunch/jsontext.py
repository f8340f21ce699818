"""The one JSON parser for what the launcher reads: variables, mapping files, run manifests.

``json.loads`` fails in two ways besides bad syntax, neither a ``JSONDecodeError``: a document
nested deeper than the interpreter's recursion limit raises ``RecursionError``, and an integer
past Python's conversion limit raises a bare ``ValueError`` without a position. :func:`loads`
turns both into a :class:`JsonLimitError` (a ``ValueError``), the integer named by its JSON
path, so that every reader can refuse a hostile document as malformed instead of crashing.
The size limit is the reader's: each knows how large its file may honestly be.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, List, Optional, Tuple, Union

# Python's default limit on the digits int() converts: json.loads raises a bare ValueError,
# without a position, past it. A fixed bound, so sys.set_int_max_str_digits(0) cannot make a
# megabyte of digits cost seconds.
MAX_INT_DIGITS = 4300
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)
PairsHook = Callable[[List[Tuple[str, Any]]], Any]


class JsonLimitError(ValueError):
    """A JSON document is well-formed but past a limit: ``str()`` says which, in a few words."""


class JsonTooDeep(JsonLimitError):
    """Nested deeper than the parser goes."""

    def __init__(self) -> None:
        super().__init__("nested too deeply to read")


class JsonLongInteger(JsonLimitError):
    """An integer of more than :data:`MAX_INT_DIGITS` digits, at ``path`` ('' for the whole).

    ``document`` is what was parsed, the integer left as a placeholder: a reader may still
    look at other fields (a rank table's status) to decide what the error means."""

    def __init__(self, path: str, digits: int, document: object = None) -> None:
        self.path = path
        self.digits = digits
        self.document = document
        what = f"an integer of {digits} digits (at most {MAX_INT_DIGITS})"
        super().__init__(f"{path}: {what}" if path else what)


class _LongInt:
    """Stands in for an integer too long to convert, so the error can name its JSON path."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def loads(text: Union[str, bytes], object_pairs_hook: Optional[PairsHook] = None) -> object:
    """``json.loads`` with its depth and integer limits as :class:`JsonLimitError`.

    :raises json.JSONDecodeError: bad syntax, with its line and column.
    :raises JsonTooDeep: nested deeper than the parser goes.
    :raises JsonLongInteger: an integer of more than :data:`MAX_INT_DIGITS` digits.
    Whatever ``object_pairs_hook`` raises passes through.
    """
    long_ints: List[_LongInt] = []
    try:
        doc = json.loads(
            text,
            parse_int=lambda digits: _json_int(digits, long_ints),
            object_pairs_hook=object_pairs_hook,
        )
    except RecursionError as exc:
        raise JsonTooDeep from exc
    if long_ints:
        path, digits = _long_int_path(doc)
        raise JsonLongInteger(path, digits or long_ints[0].digits, doc)
    return doc


def _json_int(text: str, long_ints: List[_LongInt]) -> object:
    digits = len(text.lstrip("-"))
    if digits <= MAX_INT_DIGITS:
        return int(text)
    long_ints.append(_LongInt(digits))
    return long_ints[-1]


def _long_int_path(doc: object) -> Tuple[str, int]:
    """(JSON path, digits) of the first too-long integer, walked without recursion."""
    stack: List[Tuple[str, object]] = [("", doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _LongInt):
            return path, value.digits
        if isinstance(value, dict):
            items = [(_key_path(path, key), item) for key, item in value.items()]
        elif isinstance(value, list):
            items = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
        else:
            continue
        stack.extend(reversed(items))
    return "", 0  # a pairs hook dropped it from the document: no path to name


def _key_path(path: str, key: str) -> str:
    """``cluster.worker``; a key that is not a plain word is quoted: ``a["b c"]``."""
    if not _PLAIN_KEY.fullmatch(key):
        return f"{path}[{json.dumps(key, ensure_ascii=False)}]"
    return f"{path}.{key}" if path else key
