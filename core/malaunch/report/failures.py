"""The failures that ended a job's attempts, from its nodes' summaries, each said once.

Every node's summary lists each attempt's failure as the job saw it (node 0 tells every
node), with the failed rank's last lines and Python exception as read on its own node.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.report.model import Failure, LogFile
from malaunch.report.read import as_dict, as_int, as_list, as_str, dicts

# Where a node's files are now: (node, recorded path) -> the file.
Locate = Callable[[Optional[int], str], LogFile]
FailureKey = Tuple[int, Optional[int], str, Optional[int], Optional[str]]


def job_failures(
    summaries: Sequence[Tuple[int, Mapping[str, Any]]], locate: Locate
) -> Tuple[Failure, ...]:
    """Each attempt's failure once, in attempt order (the most complete record of it)."""
    found: Dict[FailureKey, Failure] = {}
    for node, summary in summaries:
        for failure in _failures_of(node, summary, locate):
            key = (failure.attempt, failure.node, failure.kind, failure.rank, failure.role)
            known = found.get(key)
            if known is None or len(failure.tail) > len(known.tail):
                found[key] = failure
    return tuple(sorted(found.values(), key=lambda f: (f.attempt, f.node or 0)))


def _failures_of(node: int, summary: Mapping[str, Any], locate: Locate) -> List[Failure]:
    listed = [
        failure(node, as_int(entry.get("attempt")) or 0, entry["failure"], entry, locate)
        for entry in dicts(summary.get("attempts"))
        if as_dict(entry.get("failure"))
    ]
    if listed or not summary:
        return listed
    # A summary without attempts (written before they were recorded): its last attempt.
    own = as_dict(summary.get("job_failure")) or as_dict(summary.get("first_failure"))
    if not own:
        return []
    attempt = as_int(summary.get("restarts")) or 0
    return [failure(node, attempt, own, {}, locate)]


def failure(
    node: int,
    attempt: int,
    record: Mapping[str, Any],
    verdict: Mapping[str, Any],
    locate: Locate,
) -> Failure:
    """A failure record (``kind`` form, or a process entry with ``exit_code``) as a Failure."""
    where = as_int(record.get("node"))
    where = node if where is None else where
    code = as_int(record.get("code"))
    code = as_int(record.get("exit_code")) if code is None else code
    signal = as_str(record.get("signal"))
    kind = as_str(record.get("kind")) or ("signal" if signal else "exit")
    tail = tuple(line for line in as_list(record.get("tail")) if isinstance(line, str))
    hang = as_dict(record.get("hang")) or None
    log_name = as_str(record.get("log_file"))
    return Failure(
        attempt=attempt,
        node=where,
        kind=kind,
        role=as_str(record.get("role")),
        rank=as_int(record.get("rank")),
        code=code,
        signal=signal,
        log=locate(where, log_name) if log_name else None,
        tail=tail,
        exception=as_str(record.get("exception")),
        decision=as_str(verdict.get("decision")),
        hang=hang,
        error=structured_error(record.get("error")),
    )


ERROR_FIELDS = ("type", "message", "frame", "code", "timestamp", "file")


def structured_error(value: object) -> Optional[Dict[str, str]]:
    """The text fields of a failure's structured error (``@record``); None without one."""
    record = as_dict(value)
    fields = {name: as_str(record.get(name)) for name in ERROR_FIELDS}
    kept = {name: text for name, text in fields.items() if text is not None}
    return kept if "message" in kept else None


def describe(failure: Failure) -> str:
    """``rank 3 on node 1 exited with code 1`` and the like."""
    name = "rank" if failure.role in (None, "worker") else failure.role
    who = f"{name} {failure.rank}" if failure.rank is not None else (failure.role or "the job")
    where = f" on node {failure.node}" if failure.node is not None else ""
    if failure.kind == "hang":
        return f"{who}{where} hung (silent past --hang-timeout)"
    if failure.kind == "lost":
        return f"node {failure.node} was lost"
    # prestart: the launcher could not plan, or set up what the start needs
    before_start = {"stage-in": "stage-in failed", "prestart": "launcher failed before the start"}
    if failure.kind in before_start:
        said = before_start[failure.kind]
        return f"node {failure.node}'s {said} with exit code {failure.code}"
    if failure.signal:
        return f"{who}{where} died of {failure.signal}"
    if failure.kind in ("launch", "absent"):
        return f"{who}{where} could not be started ({failure.kind})"
    code = f"code {failure.code}" if failure.code is not None else "an unknown code"
    return f"{who}{where} exited with {code}"
