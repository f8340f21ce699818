"""Data-staging phases from a summary's ``staging`` key, whatever its exact shape.

Staging (SPEC §10) writes its own record into the summary; the report does not depend on
its exact layout. Any JSON object below ``staging`` with a start and an end time is a phase,
named by its ``phase``/``name``/``kind`` field or by the key it sits under. One with a
``direction`` (``in`` or ``out``) and a duration in ``seconds`` but no times is placed by
it: stage-in ends when the node's first attempt began, stage-out starts when its last
processes ended. Its other plain fields (bytes, files; lists as their length) are its
detail. Nothing usable: no band, and no complaint.
"""

from __future__ import annotations

import math
from typing import Any, List, Mapping, Optional, Tuple

from malaunch.report.model import Phase
from malaunch.report.read import as_str, moment, pick

START_KEYS = ("start", "start_time", "started", "begin", "began")
END_KEYS = ("end", "end_time", "ended", "finished", "stop")
NAME_KEYS = ("phase", "name", "kind")
MAX_DEPTH = 4  # staging -> stage_in -> files -> one file: deeper is not a phase
MAX_PHASES = 200  # a band per file of a large dataset would be unreadable
PLACED = "placed by its duration: the summary records no times"


def phases(
    staging: Any, began: Optional[float] = None, ended: Optional[float] = None
) -> Tuple[Phase, ...]:
    """Every phase found below ``staging``, in time order; ``began`` and ``ended`` (the
    node's first start and last end) place those that have a duration only."""
    found: List[Phase] = []
    _walk(staging, "staging", found, 0, (began, ended))
    found.sort(key=lambda phase: (phase.start, phase.end))
    return tuple(found[:MAX_PHASES])


def _walk(
    value: Any,
    name: str,
    found: List[Phase],
    depth: int,
    anchors: Tuple[Optional[float], Optional[float]],
) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, list):
        for item in value:
            _walk(item, name, found, depth + 1, anchors)
        return
    if not isinstance(value, dict):
        return
    phase = _timed(value, name) or _placed(value, anchors)
    if phase is not None:
        found.append(phase)
        return
    for key, item in value.items():
        _walk(item, str(key), found, depth + 1, anchors)


def _timed(value: Mapping[str, Any], fallback: str) -> Optional[Phase]:
    start, end = moment(pick(value, *START_KEYS)), moment(pick(value, *END_KEYS))
    if start is None or end is None or end < start:
        return None
    return Phase(_name(value, fallback), start, end, _detail(value))


def _placed(
    value: Mapping[str, Any], anchors: Tuple[Optional[float], Optional[float]]
) -> Optional[Phase]:
    seconds = value.get("seconds")
    direction = value.get("direction")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return None
    if not math.isfinite(seconds) or seconds < 0 or direction not in ("in", "out"):
        return None
    began, ended = anchors
    name = _name(value, f"stage-{direction}")
    detail = ", ".join(part for part in (_detail(value), PLACED) if part)
    if direction == "in" and began is not None:
        return Phase(name, began - seconds, began, detail)
    if direction == "out" and ended is not None:
        return Phase(name, ended, ended + seconds, detail)
    return None


def _name(value: Mapping[str, Any], fallback: str) -> str:
    named = pick(value, *NAME_KEYS)
    if isinstance(named, (str, int)) and not isinstance(named, bool):
        return str(named)
    direction, local = as_str(value.get("direction")), as_str(value.get("local"))
    if direction in ("in", "out"):
        return f"stage-{direction} {local}" if local else f"stage-{direction}"
    return fallback


def _detail(value: Mapping[str, Any]) -> str:
    skip = {*START_KEYS, *END_KEYS, *NAME_KEYS, "direction", "local"}
    parts = []
    for key, item in value.items():
        if key in skip:
            continue
        if isinstance(item, (str, int, float, bool)):
            parts.append(f"{key}: {item}")
        elif isinstance(item, list):
            parts.append(f"{key}: {len(item)}")
    return ", ".join(parts)
