"""The end-of-run summary: a table on the console and ``malaunch-summary.json`` in the log dir.

JSON shape (a contract for platforms and tests)::

    {"exit_code": int, "first_failure": {process entry} | null, "restarts": int,
     "processes": [{"role", "rank", "local_rank", "pid", "exit_code", "signal",
                    "start_time", "end_time", "log_file", "service"}]}

``exit_code`` of a process is null when it died of a signal, and ``signal`` then names it
(``"SIGKILL"``); times are ISO 8601 with the local UTC offset.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Any, Dict, List, Optional

from malaunch.files import write_atomic
from malaunch.log import logger
from malaunch.supervisor.loop import Outcome, signal_name
from malaunch.supervisor.output import describe
from malaunch.supervisor.spawn import Child

SUMMARY_FILE = "malaunch-summary.json"
FIRST_FAILURE_MARK = "<- first failure"


def _iso(timestamp: Optional[float]) -> Optional[str]:
    if timestamp is None:
        return None
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.astimezone().isoformat(timespec="milliseconds")


def process_entry(child: Child) -> Dict[str, Any]:
    """One process of the summary JSON."""
    code = child.returncode
    spec = child.spec
    return {
        "role": spec.role,
        "rank": spec.rank,
        "local_rank": spec.local_rank,
        "pid": child.pid,
        "exit_code": code if code is not None and code >= 0 else None,
        "signal": signal_name(-code) if code is not None and code < 0 else None,
        "start_time": _iso(child.start_wall),
        "end_time": _iso(child.end_wall),
        "log_file": spec.log_file,
        "service": spec.service,
    }


def build_summary(outcome: Outcome, restarts: int) -> Dict[str, Any]:
    """The summary JSON document of a run (its last attempt)."""
    failure = outcome.first_failure
    return {
        "exit_code": outcome.exit_code,
        "first_failure": process_entry(failure) if failure is not None else None,
        "restarts": restarts,
        "processes": [process_entry(child) for child in outcome.children],
    }


def write_summary(log_dir: str, summary: Dict[str, Any]) -> Optional[str]:
    """Write ``malaunch-summary.json`` atomically; a failure to write is reported, never fatal."""
    path = os.path.join(log_dir, SUMMARY_FILE)
    try:
        write_atomic(path, json.dumps(summary, indent=2) + "\n")
    except OSError as exc:
        logger.warning(f"cannot write {path}: {exc}")
        return None
    return path


def table_lines(outcome: Outcome) -> List[str]:
    """The console table: one row per process, the first failure marked."""
    rows = [("ROLE", "RANK", "PID", "EXIT", "TIME", "LOG")]
    for child in outcome.children:
        rank = child.spec.rank if child.spec.rank is not None else child.spec.local_rank
        cells = (child.spec.role, "-" if rank is None else str(rank), str(child.pid))
        rows.append((*cells, _ending(child), _duration(child), child.spec.log_file))
    widths = [max(len(row[col]) for row in rows) for col in range(5)]
    lines = []
    for index, row in enumerate(rows):
        line = "  ".join([cell.ljust(width) for cell, width in zip(row, widths)] + [row[5]])
        if index and outcome.children[index - 1] is outcome.first_failure:
            line += f"  {FIRST_FAILURE_MARK}"
        lines.append(line)
    return lines


def _ending(child: Child) -> str:
    code = child.returncode
    if code is None:
        return "?"
    return signal_name(-code) if code < 0 else str(code)


def _duration(child: Child) -> str:
    if child.end_mono is None:
        return "?"
    return f"{child.end_mono - child.start_mono:.2f}s"


def report(outcome: Outcome, restarts: int, log_dir: str) -> None:
    """Log the table and write the JSON file."""
    summary = build_summary(outcome, restarts)
    path = write_summary(log_dir, summary)
    head = f"exit code {summary['exit_code']}"
    if outcome.first_failure is not None:
        head += f", first failure: {describe(outcome.first_failure.spec)}"
    if restarts:
        head += f", after {restarts} restart{'s' if restarts > 1 else ''}"
    logger.info(f"summary: {head}" + (f" ({path})" if path else ""))
    for line in table_lines(outcome):
        logger.info(f"  {line}")
