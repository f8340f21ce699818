"""The end-of-run summary: a table on the console and ``malaunch-summary.json`` in the log dir.

JSON shape (a contract for platforms and tests)::

    {"exit_code": int, "node": int, "nodes": int,          # this node, the job's node count
     "first_failure": {process entry, "tail": [str], "exception": str | null,
                       "tail_file": str, "error": {error} | null} | null,
                                                    # this node's own first failure, with the
                                                    # last --tail-lines of its log (tail_file),
                                                    # its Python traceback and the structured
                                                    # error of its error file (@record)
     "stopped_by": {failure} | null,                # why the job stopped this node (exit 75)
     "job_failure": {failure} | null,               # the job's first failure, from node 0
     "hang": {hang record} | null,                  # --hang-timeout: rank, node, seconds
                                                    # silent, stack_file, culprits, groups
     "restarts": int,
     "attempts": [{"attempt", "exit_code", "failure", "decision", "delay",
                   "losses": [{"node", "lost_at", "rejoin_seconds"}]}],   # nodes lost in it:
                                                    # when (epoch s), and how long until its
                                                    # replacement joined (null: never)
     "processes": [{"role", "rank", "local_rank", "pid", "exit_code", "signal",
                    "start_time", "end_time", "log_file", "service",
                    "cpus"}],                      # cpus: --cpu-bind's CPU list, or null
     "staging": {"stage_in": {phase}, "stage_out": {phase}}}   # only with data staging

A staging phase is ``{"start_time", "end_time", "files", "bytes", "errors": [str],
"mappings": [{"local", "url", "direction", "files", "bytes", "skipped", "removed", "seconds",
"errors"}]}``; the stage-out phase is the final pass, its mappings count every pass, and its
``"missing"`` lists the LOCALs that did not exist at the final pass (a warning, no error).

An error is what a process's ``@record`` wrote to its ``TORCHELASTIC_ERROR_FILE``
(:mod:`malaunch.supervisor.errorfile`): ``{"type": str | null, "message": str, "frame": str |
null, "code": str | null, "timestamp": ISO time | null, "file": str}``.

A failure is ``{"kind": "exit"|"signal"|"hang"|"lost"|"launch"|"absent"|"stage-in", "node",
"rank", "role", "code", "signal"}``, for ``exit`` also ``"log_file"``, ``"tail"``,
``"exception"`` and ``"error"`` as read on its node, for ``stage-in`` (a node whose stage-in
failed before the job started; ``code`` is its exit code) the error line as ``"reason"``.
``processes`` are the last attempt's. ``exit_code`` of a process is null when it died of a
signal, and ``signal`` then names it (``"SIGKILL"``); times are ISO 8601 with the local UTC
offset.
"""

from __future__ import annotations

import datetime
import json
import os
from typing import Any, Dict, List, Optional

from malaunch.errors import ExitCode
from malaunch.files import write_atomic
from malaunch.job.coordinator import CAPTURE_TIMEOUT
from malaunch.log import logger
from malaunch.stopping import signal_name
from malaunch.supervisor.attempt import describe_failure
from malaunch.supervisor.errorfile import error_lines, read_error_file
from malaunch.supervisor.options import Finished
from malaunch.supervisor.outcome import Outcome
from malaunch.supervisor.output import describe
from malaunch.supervisor.runs import SUMMARY as SUMMARY_FILE
from malaunch.supervisor.spawn import Child
from malaunch.supervisor.tail import TailReader, own_log
from malaunch.wording import plural, ranks

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
        "cpus": spec.cpus,
    }


def build_summary(
    outcomes: List[Outcome],
    tail_lines: int = 20,
    tail_reader: TailReader = own_log,
    nodes: int = 1,
) -> Dict[str, Any]:
    """The summary JSON document of a run (processes of its last attempt) on one node of a job
    of ``nodes`` nodes."""
    last = outcomes[-1]
    failure = last.first_failure
    job_failure = last.job_failure
    first = None
    if failure is not None:
        tail, exception, source = tail_reader(failure.spec, tail_lines)
        first = {**process_entry(failure), "tail": tail, "exception": exception}
        first["tail_file"] = source
        first["error"] = read_error_file(failure.spec.error_file)
    return {
        "exit_code": last.exit_code,
        "node": last.node,
        "nodes": nodes,
        "first_failure": first,
        "stopped_by": job_failure if last.exit_code == ExitCode.PEER_FAILED else None,
        "job_failure": job_failure,
        "hang": last.hang,
        # The attempt number (a replacement launcher joins the job at attempt N, not 0).
        "restarts": max((o.attempt for o in outcomes if o.children), default=0),
        "attempts": [_attempt_entry(outcome) for outcome in outcomes],
        "processes": [process_entry(child) for child in last.children],
    }


def _attempt_entry(outcome: Outcome) -> Dict[str, Any]:
    verdict = outcome.verdict or {}
    return {
        "attempt": outcome.attempt,
        "exit_code": outcome.exit_code,
        "failure": outcome.job_failure,
        "decision": verdict.get("decision"),
        "delay": verdict.get("delay"),
        "losses": outcome.losses,
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
    """The console table: one row per process, the first failure marked; ``simulate``'s
    processes are node launchers, numbered by node."""
    numbered = [c for c in outcome.children if c.spec.rank is not None]
    nodes = bool(numbered) and all(child.spec.role == "node" for child in numbered)
    rows = [("ROLE", "NODE" if nodes else "RANK", "PID", "EXIT", "TIME", "LOG")]
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


def report(
    outcomes: List[Outcome],
    log_dir: str,
    tail_lines: int = 20,
    finished: Optional[Finished] = None,
    tail_reader: TailReader = own_log,
    *,
    console_dropped: int = 0,
    nodes: int = 1,
) -> None:
    """Log the table and write the JSON file; put the failure's last lines up front.

    ``finished``: what the ``finish`` hook adds (data staging's ``staging`` record), and its
    error's code when the job itself succeeded. ``console_dropped``: console lines the
    console writer dropped for a reader that did not keep up (said under the table); ``nodes``:
    the job's node count."""
    summary = build_summary(outcomes, tail_lines, tail_reader, nodes)
    if finished is not None:
        summary.update(finished.summary)
        if finished.error is not None and summary["exit_code"] == 0:
            summary["exit_code"] = int(finished.error.exit_code)
    last = outcomes[-1]
    path = write_summary(log_dir, summary)
    head = f"exit code {summary['exit_code']}"
    if last.first_failure is not None:
        head += f", first failure: {describe(last.first_failure.spec)}"
    elif summary["stopped_by"] is not None:
        head += f", stopped because {describe_failure(summary['stopped_by'])}"
    restarts = summary["restarts"]
    if restarts:
        head += f", after {plural(restarts, 'restart')}"
    if not last.children:
        return  # nothing started: the error that says why is the one line to read
    logger.info(f"summary: {head}" + (f" ({path})" if path else ""))
    if summary["hang"] is not None:
        logger.info(f"  {hang_line(summary['hang'])}")
    for line in table_lines(last):
        logger.info(f"  {line}")
    if console_dropped:
        logger.warning(
            f"{plural(console_dropped, 'console line')} dropped "
            f"during the run (the console's reader did not keep up); the log files in "
            f"{log_dir} hold every line"
        )
    _show_failure(summary.get("first_failure") or summary.get("job_failure"))


def hang_line(hang: Dict[str, Any]) -> str:
    """``hang: rank 1 is elsewhere, in ...`` (the reason names the odd ranks, if any:
    :mod:`malaunch.hang.blame`), and the nodes whose stacks node 0 did not wait for."""
    line = f"hang: {hang.get('reason', '')}"
    if not hang.get("culprits"):
        line += ": no rank singled out"
    silent = [node for node in hang.get("nodes_silent") or () if isinstance(node, int)]
    count = hang.get("nodes_silent_count")
    more = (
        f" and {count - len(silent):,} more"
        if isinstance(count, int) and count > len(silent)
        else ""
    )
    if silent:
        line += f" (no stacks from {ranks(silent, 'node')}{more} within {CAPTURE_TIMEOUT:g}s)"
    return line


def _show_failure(failure: Optional[Dict[str, Any]]) -> None:
    """The failed rank's structured error, last lines and exception, so nobody has to find
    the file."""
    if not failure:
        return
    where = describe_failure(failure) if "kind" in failure else _process_name(failure)
    error = failure.get("error")
    if isinstance(error, dict):
        logger.info(f"{where}: its error file ({error.get('file')}) says:")
        for line in error_lines(error):
            logger.info(f"  | {line}")
    if not failure.get("tail"):
        return
    log_file = failure.get("tail_file") or failure.get("log_file") or "its log"
    count = len(failure["tail"])
    lines = plural(count, "line") if count > 1 else "line"
    logger.info(f"last {lines} of {log_file} ({where}):")
    for line in failure["tail"]:
        logger.info(f"  | {line}")
    if failure.get("exception") and failure["exception"] not in "\n".join(failure["tail"]):
        logger.info("its Python exception:")
        for line in failure["exception"].splitlines():
            logger.info(f"  | {line}")


def _process_name(entry: Dict[str, Any]) -> str:
    role, rank = entry.get("role"), entry.get("rank")
    label = "rank" if role in (None, "worker") else role
    return f"{label} {rank}" if rank is not None else str(role)
