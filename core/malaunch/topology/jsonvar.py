"""JSON documents held by environment variables (``TF_CONFIG``, ``DATASET_MAP``).

:func:`load_json` bounds the size and turns every way ``json.loads`` can fail into one
:class:`TopologyError` naming the variable: bad syntax, nesting deeper than the parser goes,
and integers past Python's conversion limit, which ``json.loads`` reports as a bare
``ValueError`` without a position (this module names their JSON path instead).
"""

from __future__ import annotations

import json
import re
from typing import List, Mapping, Optional, Tuple, Union

from malaunch.errors import TopologyError

MAX_JSON_VARIABLE = 1 << 20  # bytes: TF_CONFIG of 10,000 tasks is about 400 KB
# Python's default limit on the digits int() converts: json.loads raises a bare ValueError,
# without a position, past it. A fixed bound, so sys.set_int_max_str_digits(0) cannot make a
# megabyte of digits cost seconds.
MAX_JSON_INT_DIGITS = 4300
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+", re.ASCII)


class _LongInt:
    """Stands in for an integer too long to convert, so the error can name its JSON path."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def load_json(env: Mapping[str, str], name: str) -> object:
    """The JSON document a variable holds, bounded in size, any nesting refused cleanly.

    :raises TopologyError: not JSON, nested deeper than the parser goes, over 1 MiB, or an
        integer of more than :data:`MAX_JSON_INT_DIGITS` digits (named by its JSON path).
    """
    raw = env[name]
    if len(raw) > MAX_JSON_VARIABLE:
        msg = f"{name} is {len(raw)} characters, more than {MAX_JSON_VARIABLE}: not a real {name}"
        raise TopologyError(msg)
    try:
        doc, long_int = loads(raw)
    except ValueError as exc:  # JSONDecodeError, or a conversion the hook did not catch
        msg = f"{name} is not valid JSON ({exc})"
        raise TopologyError(msg) from exc
    except RecursionError as exc:
        msg = f"{name} is not valid JSON (nested too deeply to read)"
        raise TopologyError(msg) from exc
    if long_int is not None:
        raise TopologyError(long_int_message(name, long_int))
    return doc


def loads(raw: Union[str, bytes]) -> Tuple[object, Optional[Tuple[str, int]]]:
    """``json.loads(raw)`` with integers of more than :data:`MAX_JSON_INT_DIGITS` digits kept
    as placeholders: the document, and the JSON path and digits of the first such integer (None
    when there is none). The document is only of use when there is none.

    :raises ValueError, RecursionError: as ``json.loads`` (bad syntax or encoding, too deep).
    """
    long_ints: List[_LongInt] = []
    doc = json.loads(raw, parse_int=lambda text: _json_int(text, long_ints))
    return doc, (_long_int_path(doc) if long_ints else None)


def long_int_message(where: str, long_int: Tuple[str, int]) -> str:
    """``where: path: an integer of N digits (at most 4300)``; an empty ``where`` or path (the
    whole document is the integer) is left out."""
    path, digits = long_int
    what = f"an integer of {digits} digits (at most {MAX_JSON_INT_DIGITS})"
    return ": ".join(part for part in (where, path, what) if part)


def _json_int(text: str, long_ints: List[_LongInt]) -> object:
    digits = len(text.lstrip("-"))
    if digits <= MAX_JSON_INT_DIGITS:
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
    return "", 0  # not reached: the caller saw at least one


def _key_path(path: str, key: str) -> str:
    """``cluster.worker``; a key that is not a plain word is quoted: ``a["b c"]``."""
    if not _PLAIN_KEY.fullmatch(key):
        return f"{path}[{json.dumps(key, ensure_ascii=False)}]"
    return f"{path}.{key}" if path else key
