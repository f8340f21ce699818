"""Data-staging phases from a summary's ``staging`` key, whatever its exact shape.

Staging (SPEC §10) writes its own record into the summary. The report does not depend on
its exact layout: any JSON object below ``staging`` that has a start and an end time is a
phase, named by its ``phase``/``name``/``kind``/``direction`` field or by the key it sits
under; its other plain fields (bytes, files, errors) are its detail. Nothing usable: no band.
"""

from __future__ import annotations

from typing import Any, List, Tuple

from malaunch.report.model import Phase
from malaunch.report.read import moment, pick

START_KEYS = ("start", "start_time", "started", "begin", "began")
END_KEYS = ("end", "end_time", "ended", "finished", "stop")
NAME_KEYS = ("phase", "name", "kind", "direction")
MAX_DEPTH = 4  # staging -> stage_in -> files -> one file: deeper is not a phase
MAX_PHASES = 200  # a band per file of a large dataset would be unreadable


def phases(staging: Any) -> Tuple[Phase, ...]:
    """Every phase found below ``staging``, in time order."""
    found: List[Phase] = []
    _walk(staging, "staging", found, 0)
    found.sort(key=lambda phase: (phase.start, phase.end))
    return tuple(found[:MAX_PHASES])


def _walk(value: Any, name: str, found: List[Phase], depth: int) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, list):
        for item in value:
            _walk(item, name, found, depth + 1)
        return
    if not isinstance(value, dict):
        return
    start, end = moment(pick(value, *START_KEYS)), moment(pick(value, *END_KEYS))
    if start is not None and end is not None and end >= start:
        found.append(Phase(_name(value, name), start, end, _detail(value)))
        return
    for key, item in value.items():
        _walk(item, str(key), found, depth + 1)


def _name(value: Any, fallback: str) -> str:
    named = pick(value, *NAME_KEYS)
    return str(named) if isinstance(named, (str, int)) else fallback


def _detail(value: Any) -> str:
    skip = {*START_KEYS, *END_KEYS, *NAME_KEYS}
    plain = (str, int, float, bool)
    items = value.items()
    return ", ".join(f"{k}: {v}" for k, v in items if k not in skip and isinstance(v, plain))
