"""``--stage-in``/``--stage-out`` values, and the ``{node}``/``{rank}`` placeholders.

A pair is ``LOCAL=URL``, split at the first ``=`` (a URL may hold more, in a query). LOCAL is a
path, relative to the launch directory unless absolute. Both sides may name ``{node}`` (this
node's rank, ``node_rank``) and ``{rank}`` (the global rank of this node's first process):
each node then has its own copy, and for a stage-out each node uploads its own; without them
one shared output is uploaded by node 0 alone. ``{{`` and ``}}`` stand for literal braces.
"""

from __future__ import annotations

import string
from typing import Iterable, List, Optional, Type

from malaunch.errors import MalaunchError, UsageError
from malaunch.staging.models import StageMapping

PLACEHOLDERS = ("node", "rank")
_OPTIONS = {"--stage-in": "in", "--stage-out": "out"}


def parse_pairs(values: Iterable[str], option: str) -> List[StageMapping]:
    """The mappings of the repeated ``option`` (``--stage-in`` or ``--stage-out``).

    :raises UsageError: a value that is not ``LOCAL=URL``, naming the option and the value.
    """
    direction = _OPTIONS[option]
    mappings = []
    for value in values:
        local, sep, url = value.partition("=")
        what = f"{option} {value!r}"
        if not sep or not local.strip() or not url.strip():
            msg = f"{what}: expected LOCAL=URL (data=s3://bucket/prefix)"
            raise UsageError(msg)
        mapping = StageMapping(local=local.strip(), url=url.strip(), direction=direction)
        check_mapping(mapping, what)
        mappings.append(mapping)
    return mappings


def check_mapping(
    mapping: StageMapping, what: str, error: Type[MalaunchError] = UsageError
) -> None:
    """Placeholders well formed and known, no NUL: ``error`` naming ``what`` otherwise."""
    for text in (mapping.local, mapping.url):
        if "\0" in text:
            msg = f"{what}: NUL character"
            raise error(msg)
        placeholders(text, what, error)


def placeholders(text: str, what: str, error: Type[MalaunchError] = UsageError) -> List[str]:
    """The placeholder names in ``text``, each one of :data:`PLACEHOLDERS`."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        msg = f"{what}: {exc} (write {{{{ and }}}} for literal braces)"
        raise error(msg) from exc
    names = []
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if field not in PLACEHOLDERS or spec or conversion:
            msg = f"{what}: unknown placeholder {{{field}}}: expected {{node}} or {{rank}}"
            raise error(msg)
        names.append(field)
    return names


def per_node(mapping: StageMapping) -> bool:
    """Whether LOCAL names the node or rank, so that every node has its own copy."""
    return bool(placeholders(mapping.local, str(mapping)))


def expand(mapping: StageMapping, node_rank: int, rank: Optional[int]) -> StageMapping:
    """``mapping`` with ``{node}`` and ``{rank}`` replaced in LOCAL and URL.

    :raises UsageError: ``{rank}`` is used and ``rank`` is not known.
    """
    values = {"node": str(node_rank), "rank": "" if rank is None else str(rank)}
    if rank is None and "rank" in placeholders(mapping.local + mapping.url, str(mapping)):
        msg = f"{mapping}: {{rank}} is not known on this node (use {{node}})"
        raise UsageError(msg)
    return mapping.model_copy(
        update={"local": mapping.local.format(**values), "url": mapping.url.format(**values)}
    )
