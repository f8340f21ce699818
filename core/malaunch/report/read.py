"""Reading what a run left, defensively: its files may be half-copied, edited or hostile.

Nothing here raises on a bad value: a field of the wrong type reads as missing, so a report
of a damaged run shows what it can.
"""

from __future__ import annotations

import bisect
import datetime
import math
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from malaunch.files import read_regular
from malaunch.log import logger
from malaunch.supervisor.runlog import RECORD, load_json_object

MAX_INDEX = 1024 * 1024 * 1024  # 50 million records
LAST_MOMENT = 253402300799.0  # 9999-12-31: later (or before 1970) is not a time a run recorded


def read_json(path: Path) -> Optional[Dict[str, Any]]:
    """The JSON object in ``path``; None (and a warning unless it is absent) otherwise."""
    try:  # the launcher's own reader: bounded, never blocking, any nesting or number refused
        return load_json_object(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        logger.warning(f"ignoring {path}: {_reason(exc)}")
        return None


def _reason(exc: Exception) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


def read_arrivals(path: Path) -> Dict[int, List[float]]:
    """File id -> the sorted arrival times of its chunks, from a line index."""
    try:
        data = read_regular(path, MAX_INDEX)
    except OSError:
        return {}
    arrivals: Dict[int, List[float]] = {}
    usable = len(data) - len(data) % RECORD.size
    for at in range(0, usable, RECORD.size):
        file_id, _, arrived = RECORD.unpack_from(data, at)
        if math.isfinite(arrived):
            arrivals.setdefault(file_id, []).append(arrived)
    for times in arrivals.values():
        times.sort()
    return arrivals


def last_before(times: List[float], start: float, end: Optional[float]) -> Optional[float]:
    """The latest of the sorted ``times`` in ``[start, end)`` (no end: to the last)."""
    index = bisect.bisect_left(times, end) if end is not None else len(times)
    if index and times[index - 1] >= start:
        return times[index - 1]
    return None


def moment(value: Any) -> Optional[float]:
    """An ISO 8601 time or seconds since the epoch, as seconds; None if it is neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            parsed = datetime.datetime.fromisoformat(value.strip())
            if parsed.tzinfo is None:
                parsed = parsed.astimezone()  # a naive time is this machine's local time
            seconds = parsed.timestamp()
        except (ValueError, OverflowError, OSError):
            return None
    else:
        return None
    return seconds if math.isfinite(seconds) and 0 <= seconds < LAST_MOMENT else None


def as_dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> List[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def dicts(value: Any) -> List[Dict[str, Any]]:
    """The JSON objects of a list (anything else in it is skipped)."""
    return [item for item in as_list(value) if isinstance(item, dict)]


def locate(recorded: str, base: Path) -> Optional[Path]:
    """Where a file the run recorded is now: at its path, or, for a log dir that was moved
    or copied from the cluster, the longest tail of that path found below ``base``."""
    if not recorded or "\x00" in recorded:
        return None
    path = Path(recorded)
    parts = path.parts
    candidates = [path] if path.is_absolute() else []
    candidates += [base.joinpath(*parts[-count:]) for count in range(len(parts), 0, -1)]
    for candidate in candidates:
        try:
            if candidate.is_file():
                return candidate
        except OSError:  # a name too long, a directory we may not enter
            continue
    return None


def pick(mapping: Mapping[str, Any], *keys: str) -> Any:
    """The first of ``keys`` present (not None) in ``mapping``."""
    for key in keys:
        if mapping.get(key) is not None:
            return mapping[key]
    return None
