"""Block YAML for the manifests' plain data (dict, list, str, int, bool, None).

YAML 1.2 reads JSON, but people read block YAML. This writer emits only what the models
produce, and quotes every string a YAML 1.1 or 1.2 reader could take for something else
(``yes``, ``on``, ``1e3``, ``12:30``, ``~``, a leading ``*`` or ``#``, ...): a string is
written bare only when it looks like a plain word, path or option, else double-quoted with
JSON's escapes, which are YAML's too (non-ASCII included, so no reader misses a line break).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, List, Sequence

INDENT = 2
# Bare only: optional leading dashes, then a letter, '_' or '/', then word characters, dots,
# slashes, '=', '+', ':', '@', '-' (a ':' is safe inside a plain scalar unless a space follows).
_PLAIN = re.compile(r"-{0,2}[A-Za-z_/][A-Za-z0-9_./=+:@-]*", re.ASCII)
# Words YAML 1.1 reads as booleans or null (1.2 keeps fewer): never bare, in any case.
_RESERVED = frozenset(
    {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "nan", "inf"}
)


def scalar(value: Any) -> str:
    """One scalar as YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            msg = f"a manifest number must be finite, got {value!r}"
            raise ValueError(msg)
        return repr(value)
    if isinstance(value, str):
        return value if _bare(value) else json.dumps(value, ensure_ascii=True)
    msg = f"cannot write a {type(value).__name__} as YAML"
    raise TypeError(msg)


def _bare(text: str) -> bool:
    return (
        _PLAIN.fullmatch(text) is not None
        and text.lower() not in _RESERVED
        and not text.endswith(":")
    )


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    return scalar(value)


def _nested(value: Any) -> bool:
    return isinstance(value, (dict, list, tuple)) and len(value) > 0


def _block(value: Any, indent: int) -> List[str]:
    pad = " " * indent
    lines: List[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                msg = f"a manifest key must be a string, got {key!r}"
                raise TypeError(msg)
            if _nested(item):
                lines.append(f"{pad}{scalar(key)}:")
                lines += _block(item, indent + INDENT)
            else:
                lines.append(f"{pad}{scalar(key)}: {_inline(item)}")
        return lines
    for item in value:
        if _nested(item):
            inner = _block(item, indent + INDENT)
            lines.append(f"{pad}- {inner[0][indent + INDENT :]}")
            lines += inner[1:]
        else:
            lines.append(f"{pad}- {_inline(item)}")
    return lines


def dump(document: Any) -> str:
    """One YAML document (a dict or list; a scalar alone is written as it is)."""
    if not _nested(document):
        return _inline(document) + "\n"
    return "\n".join(_block(document, 0)) + "\n"


def dump_all(documents: Sequence[Any]) -> str:
    """Several documents, each after a ``---`` line."""
    return "".join(f"---\n{dump(document)}" for document in documents)
