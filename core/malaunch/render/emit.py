"""The one YAML writer of malaunch: PyYAML's safe dumper, in block style, for people and parsers.

The manifests' plain data (dict, list, str, int, bool, None) is written by PyYAML with
``allow_unicode`` (an emoji stays an emoji, never a JSON surrogate pair that libyaml and Go's
YAML reader refuse), in the models' own key order, without anchors. On top of PyYAML's own
YAML 1.1 rules, a string is quoted whenever a YAML 1.2 reader or Go's (kubectl's) could read
it as something else (``1e3``, ``0o17``, ``y``, ``-inf``); a string of several lines is written
as a literal block where YAML can hold it exactly, else double-quoted with escapes. Text YAML
cannot carry at all (a lone surrogate) is refused by the caller before it gets here.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Sequence

import yaml

# Long values (a command line, a path) stay on one line: folding them at 80 columns reads
# back the same, but no one reads it.
WIDTH = 1 << 20
# What a YAML 1.2 reader (core schema) or Go's YAML reader (which kubectl uses) takes for a
# number, a boolean or null, beyond PyYAML's YAML 1.1 rules. Generous on purpose: a string
# matched here only gets quotes.
_NOT_A_STRING = re.compile(
    r"""^(?:
        [-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][-+]?[0-9_]+)?
      | [-+]?0(?:[xX][0-9a-fA-F_]+|[oO][0-7_]+|[bB][01_]+)
      | [-+]?\.?(?:inf|infinity|nan)
      | y|n|yes|no|on|off|true|false|null|~
    )$""",
    re.IGNORECASE | re.VERBOSE,
)
# Line breaks of YAML 1.1 that YAML 1.2 reads as ordinary characters, and a carriage return:
# a string holding one is double-quoted, where each is an escape every reader agrees on
# (PyYAML itself writes them raw into a single-quoted string, and reads that back changed).
_ODD_BREAKS = frozenset("\r\x85\u2028\u2029")


class _Dumper(yaml.SafeDumper):
    """Block YAML with each sequence indented under its key, no anchors or aliases."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # PyYAML writes a list under a key at the key's own indentation; people expect it one
        # step in, as kubectl's documentation and every manifest in the wild show it.
        super().increase_indent(flow, False)

    def ignore_aliases(self, data: Any) -> bool:
        # A shared list (volume mounts of several pods) is written out each time: an alias
        # (&id001) is valid YAML, but no reader of a manifest expects it.
        return True


def _string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # Odd breaks: double quotes, as PyYAML would write them raw in a plain or single-quoted
    # string. Several lines: a literal block, where PyYAML falls back to quotes if a block
    # cannot hold the text exactly.
    style = '"' if _ODD_BREAKS.intersection(text) else ("|" if "\n" in text else None)
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


def _number(dumper: yaml.SafeDumper, value: float) -> yaml.ScalarNode:
    if not math.isfinite(value):
        msg = f"a manifest number must be finite, got {value!r}"
        raise ValueError(msg)
    return dumper.represent_float(value)


def _mapping(dumper: yaml.SafeDumper, value: Dict[Any, Any]) -> yaml.MappingNode:
    for key in value:
        if not isinstance(key, str):
            msg = f"a manifest key must be a string, got {key!r}"
            raise TypeError(msg)
    return dumper.represent_dict(value)


def _sequence(dumper: yaml.SafeDumper, value: Sequence[Any]) -> yaml.SequenceNode:
    return dumper.represent_list(list(value))


def _refuse(_dumper: yaml.SafeDumper, value: Any) -> yaml.Node:
    msg = f"cannot write a {type(value).__name__} as YAML"
    raise TypeError(msg)


_Dumper.add_implicit_resolver("tag:malaunch,2026:not-a-string", _NOT_A_STRING, None)
_Dumper.add_representer(str, _string)
_Dumper.add_representer(float, _number)
_Dumper.add_representer(dict, _mapping)
_Dumper.add_representer(tuple, _sequence)
_Dumper.add_representer(set, _refuse)
_Dumper.add_representer(bytes, _refuse)


def dump_all(documents: Sequence[Any]) -> str:
    """Several documents, each after a ``---`` line."""
    return _write(list(documents), explicit_start=True)


def dump(document: Any) -> str:
    """One YAML document."""
    return _write([document], explicit_start=False)


def _write(documents: List[Any], *, explicit_start: bool) -> str:
    text: str = yaml.dump_all(
        documents,
        Dumper=_Dumper,
        allow_unicode=True,
        sort_keys=False,
        default_flow_style=False,
        explicit_start=explicit_start,
        width=WIDTH,
    )
    return text
