"""A node's processes as spans of time, one bar per attempt: from its manifest and summary.

The manifest (``malaunch-run.json``) lists every attempt's processes and when the attempt
started; the summary (``malaunch-summary.json``) has exact start and end times for the last
attempt only, and each attempt's failure. So an earlier attempt's bars start at the
attempt's start and end where the next attempt began, less its restart delay: an estimate,
drawn as one. The line index gives each process's last output in each attempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from malaunch.report.model import FAILED, HUNG, OK, STOPPED, UNKNOWN, Bar, LogFile, Row
from malaunch.report.read import as_dict, as_int, as_list, as_str, dicts, last_before, moment

Locate = Callable[[str], LogFile]
ProcessKey = Tuple[str, Optional[int], Optional[int], str]


@dataclass
class Attempt:
    """One attempt of a node: its number, start, processes and the failure that ended it."""

    number: int
    started: Optional[float]
    processes: List[Dict[str, Any]]
    failure: Dict[str, Any] = field(default_factory=dict)
    delay: float = 0.0


def attempts_of(
    node: int, manifest: Mapping[str, Any], summary: Mapping[str, Any]
) -> List[Attempt]:
    """The node's attempts: the manifest's, else the summary's last one alone."""
    listed = [
        Attempt(as_int(a.get("attempt")) or 0, moment(a.get("started")), dicts(a.get("processes")))
        for a in dicts(manifest.get("attempts"))
    ]
    if not listed and summary.get("processes") is not None:
        number = as_int(summary.get("restarts")) or 0
        listed = [Attempt(number, None, dicts(summary.get("processes")))]
    verdicts = {as_int(a.get("attempt")): a for a in dicts(summary.get("attempts"))}
    for attempt in listed:
        verdict = verdicts.get(attempt.number, {})
        failure = as_dict(verdict.get("failure"))
        attempt.failure = {"node": node, **failure} if failure else {}
        delay = verdict.get("delay")
        attempt.delay = float(delay) if isinstance(delay, (int, float)) and delay > 0 else 0.0
    if listed:
        listed[-1].started = _began(listed[-1].started, summary)
    return listed


def _began(recorded: Optional[float], summary: Mapping[str, Any]) -> Optional[float]:
    """When the last attempt began: the manifest records an attempt once its processes have
    started, so the summary's exact start times can be earlier; it began with the first."""
    exact = [moment(p.get("start_time")) for p in dicts(summary.get("processes"))]
    return min((at for at in (recorded, *exact) if at is not None), default=None)


@dataclass
class Context:
    """What every bar of one attempt of one node is judged by."""

    node: int
    attempt: Attempt
    bound: Optional[float]  # the estimated end: the next attempt's start less its delay
    hang: Dict[str, Any]
    summarised: bool
    arrivals: Mapping[int, List[float]]


def rank_rows(
    node: int,
    manifest: Mapping[str, Any],
    summary: Mapping[str, Any],
    arrivals: Mapping[int, List[float]],
    locate: Locate,
) -> Tuple[Row, ...]:
    """One row per process of the node's plan, each with a bar per attempt it ran in."""
    attempts = attempts_of(node, manifest, summary)
    exact = _by_process(dicts(summary.get("processes")))
    bars: Dict[ProcessKey, List[Bar]] = {}
    firsts: Dict[ProcessKey, Dict[str, Any]] = {}
    for index, attempt in enumerate(attempts):
        last = index == len(attempts) - 1
        following = None if last else attempts[index + 1].started
        bound = following - attempt.delay if following is not None else None
        hang = as_dict(summary.get("hang")) if last else {}
        hang = hang or as_dict(attempt.failure.get("hang"))
        context = Context(node, attempt, bound, hang, bool(summary), arrivals)
        for process in attempt.processes:
            key = _key(process)
            entry = exact.get(as_int(process.get("pid")), exact.get(key)) if last else None
            firsts.setdefault(key, process)
            bar = _bar(context, process, entry)
            bars.setdefault(key, []).extend([bar] if bar else [])
    return tuple(_row(node, firsts[key], bars[key], locate) for key in firsts)


def _by_process(entries: List[Dict[str, Any]]) -> Dict[Any, Dict[str, Any]]:
    """The summary's entries by pid, and by role, ranks and log for a process without one."""
    found: Dict[Any, Dict[str, Any]] = {_key(entry): entry for entry in entries}
    found.update((as_int(e.get("pid")), e) for e in entries if as_int(e.get("pid")) is not None)
    return found


def _bar(
    context: Context, process: Mapping[str, Any], entry: Optional[Mapping[str, Any]]
) -> Optional[Bar]:
    times = _times(process, entry, context)
    if times is None:
        return None  # nothing says when it ran: listed, not drawn
    start, end, last_output = times
    outcome, ending = classify(context, process, entry)
    rank = _rank(process)
    culprits = [as_int(r) for r in as_list(context.hang.get("culprits"))]
    pid = as_int(process.get("pid"))
    exact = entry is not None
    culprit = rank is not None and rank in culprits
    return Bar(
        context.attempt.number, start, end, outcome, ending, exact, pid, last_output, culprit
    )


def _times(
    process: Mapping[str, Any], entry: Optional[Mapping[str, Any]], context: Context
) -> Optional[Tuple[float, float, Optional[float]]]:
    """Start, end and last output of a process in an attempt (see the module docstring)."""
    entry = entry or {}
    attempt, bound = context.attempt, context.bound
    start = moment(entry.get("start_time")) or attempt.started
    if start is None:
        return None
    file_id = as_int(process.get("file"))
    times = context.arrivals.get(file_id, []) if file_id is not None else []
    window_end = bound + attempt.delay if bound is not None else None
    last_output = last_before(times, min(start, attempt.started or start), window_end)
    end = moment(entry.get("end_time")) or bound or last_output or start
    return start, max(start, end, last_output or start), last_output


def classify(
    context: Context, process: Mapping[str, Any], entry: Optional[Mapping[str, Any]]
) -> Tuple[str, str]:
    """The outcome (the bar's colour) and the ending shown for a process in an attempt."""
    node, failure, hang = context.node, context.attempt.failure, context.hang
    ending = _ending(entry)
    if _names(failure, node, process):
        kind = failure.get("kind")
        return (HUNG if kind == "hang" else FAILED), ending or _failure_ending(failure)
    if hang and _names({"node": node, **hang}, node, process):
        return HUNG, ending or "hung"
    if entry is None:
        if failure:
            return STOPPED, "stopped"
        return UNKNOWN, "not in the summary" if context.summarised else "unknown (no summary)"
    if entry.get("exit_code") == 0 or (process.get("service") is True and not failure):
        return OK, ending
    return (STOPPED if failure else FAILED), ending


def _names(failure: Mapping[str, Any], node: int, process: Mapping[str, Any]) -> bool:
    """Whether a failure (or hang) record is about this process of this node."""
    if not failure or (failure.get("rank") is None and failure.get("role") is None):
        return False
    same_node = failure.get("node") in (None, node)
    same_role = failure.get("role") in (None, process.get("role"))
    return same_node and same_role and failure.get("rank") == process.get("rank")


def _ending(entry: Optional[Mapping[str, Any]]) -> str:
    if not entry:
        return ""
    signal = as_str(entry.get("signal"))
    if signal:
        return signal
    code = as_int(entry.get("exit_code"))
    return f"exit {code}" if code is not None else "unknown"


def _failure_ending(failure: Mapping[str, Any]) -> str:
    if as_str(failure.get("signal")):
        return str(failure["signal"])
    code = as_int(failure.get("code"))
    return f"exit {code}" if code is not None else str(failure.get("kind") or "failed")


def _rank(process: Mapping[str, Any]) -> Optional[int]:
    return as_int(process.get("rank"))


def _key(process: Mapping[str, Any]) -> ProcessKey:
    role = as_str(process.get("role")) or "process"
    log = as_str(process.get("log_file")) or ""
    return role, as_int(process.get("rank")), as_int(process.get("local_rank")), log


def _row(node: int, process: Mapping[str, Any], bars: List[Bar], locate: Locate) -> Row:
    role, rank, local_rank, log = _key(process)
    return Row(node, role, rank, local_rank, locate(log), tuple(bars))


# A node launcher's exit code says how its node ended: 75 stopped for another node's failure.
LAUNCHER_OUTCOMES = {0: OK, 75: STOPPED, 124: HUNG}


def node_bar(
    manifest: Mapping[str, Any],
    summary: Mapping[str, Any],
    rows: Tuple[Row, ...],
    entry: Optional[Mapping[str, Any]] = None,
) -> Optional[Bar]:
    """The node launcher's own life: from the simulation's summary when it ran under one
    (``entry``), else from the manifest's start to its processes' last end."""
    entry = entry or {}
    start, end = moment(entry.get("start_time")), moment(entry.get("end_time"))
    if start is not None and end is not None:
        outcome = _launcher_outcome(as_int(entry.get("exit_code")), entry.get("signal"))
        pid = as_int(entry.get("pid"))
        return Bar(0, start, max(start, end), outcome, _ending(entry), True, pid)
    code = as_int(summary.get("exit_code"))
    ending = "unknown" if code is None else f"exit {code}"
    starts = [bar.start for row in rows for bar in row.bars]
    start = moment(manifest.get("started")) or min(starts, default=None)
    if start is None:
        return None
    end = max([start, *(bar.end for row in rows for bar in row.bars)])
    return Bar(0, start, end, _launcher_outcome(code, None), ending, False)


def _launcher_outcome(code: Optional[int], signal: Any) -> str:
    if signal:
        return FAILED
    return UNKNOWN if code is None else LAUNCHER_OUTCOMES.get(code, FAILED)
