"""JSON documents held by environment variables (``TF_CONFIG``, ``DATASET_MAP``).

:func:`load_json` bounds the size and turns every way the launcher's JSON parser
(:func:`malaunch.jsontext.loads`) can fail into one :class:`TopologyError` naming the
variable: bad syntax, nesting deeper than the parser goes, and integers past Python's
conversion limit (named by their JSON path).
"""

from __future__ import annotations

from typing import Mapping

from malaunch.errors import TopologyError
from malaunch.jsontext import MAX_INT_DIGITS, JsonLongInteger, loads

MAX_JSON_VARIABLE = 1 << 20  # bytes: TF_CONFIG of 10,000 tasks is about 400 KB
MAX_JSON_INT_DIGITS = MAX_INT_DIGITS


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
        return loads(raw)
    except JsonLongInteger as exc:
        msg = f"{name}: {exc}"
        raise TopologyError(msg) from exc
    except ValueError as exc:  # JSONDecodeError, or nested too deeply to read
        msg = f"{name} is not valid JSON ({exc})"
        raise TopologyError(msg) from exc
