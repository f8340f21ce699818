"""A run's log dir read into a :class:`JobReport`: one launcher's dir, or a simulation's.

A launcher's run folder holds its manifest, summary, line index, per-rank logs and stacks
(a log dir given is read through its latest run: :mod:`malaunch.supervisor.runs`). A
simulation's holds the simulation parent's own manifest and summary (its processes are the
node launchers) and one ``node-<k>/`` per node, each a launcher's log dir; a job's nodes
gathered from a cluster into ``node-<k>/`` directories read the same way.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from malaunch.errors import MissingInputError
from malaunch.report.bars import attempts_of, node_bar, rank_rows
from malaunch.report.failures import job_failures
from malaunch.report.model import Failure, JobReport, LogFile, Loss, NodeReport, Row
from malaunch.report.read import (
    as_dict,
    as_int,
    as_str,
    dicts,
    locate,
    read_arrivals,
    read_json,
)
from malaunch.report.staging import phases
from malaunch.supervisor.runs import INDEX, MANIFEST, SUMMARY, current_run, run_to_read
from malaunch.supervisor.tail import log_tail

NODE_DIR = re.compile(r"node-(\d{1,6})")
TAIL_LINES = 20  # of a hung rank's log (a failed rank's are in the summary already)


@dataclasses.dataclass
class Found:
    """One launcher's files, read."""

    directory: Path
    manifest: Dict[str, Any]
    summary: Dict[str, Any]


def collect(directory: Path) -> JobReport:
    """Read ``directory`` (a launcher's log dir or a simulation's, through its latest run, or
    one of their run folders) into a report."""
    if directory.is_dir():
        directory = run_to_read(directory)
    if not directory.is_dir():
        what = "not a directory" if directory.exists() else "no such directory"
        msg = f"{directory}: {what} (expected the log dir of a malaunch run, e.g. --log-dir's)"
        raise MissingInputError(msg)
    own = _read(directory)
    node_dirs = _node_dirs(directory)
    if not node_dirs and not own.manifest and not own.summary:
        msg = (
            f"{directory}: no readable {MANIFEST} or {SUMMARY} there or in a node-<k>/ "
            f"below it; not the log dir of a malaunch run"
        )
        raise MissingInputError(msg)
    if node_dirs:
        return _simulation(own, [(k, _read(path)) for k, path in node_dirs])
    return _job(own, [(own_index(own, 0), own)], simulated=False)


def _read(directory: Path) -> Found:
    manifest = read_json(directory / MANIFEST) or {}
    return Found(directory, manifest, read_json(directory / SUMMARY) or {})


def _node_dirs(directory: Path) -> List[Tuple[int, Path]]:
    """Each ``node-<k>/``'s files: a simulation's node folder, or a node launcher's log dir
    (gathered from a cluster, or ``simulate --print-env``'s ``--log-dir .../node-<k>``) read
    through its latest run."""
    found = []
    for path in directory.iterdir():
        match = NODE_DIR.fullmatch(path.name)
        if not match or not path.is_dir():
            continue
        files = path if _has_files(path) else current_run(path) or path
        if _has_files(files):
            found.append((int(match.group(1)), files))
    return sorted(found)


def _has_files(directory: Path) -> bool:
    return any((directory / name).is_file() for name in (MANIFEST, SUMMARY))


def own_index(found: Found, default: int) -> int:
    """The node a launcher's files say it ran as (its manifest's, else its summary's)."""
    for value in (as_int(found.manifest.get("node")), as_int(found.summary.get("node"))):
        if value is not None:
            return value
    return default


def _simulation(parent: Found, nodes: List[Tuple[int, Found]]) -> JobReport:
    """A simulation: the node launchers are the parent's processes, ``role`` "node"."""
    entries = {as_int(p.get("rank")): p for p in _parent_processes(parent, nodes=True)}
    indexed = [(own_index(found, k), found) for k, found in nodes]
    job = _job(parent, indexed, simulated=True, entries=entries)
    # Each node launcher's own output (node-<k>.log) goes with its node, the rest stays here.
    parent_logs = {log.recorded: log for log in _files(parent)}
    reports = []
    for node in job.nodes:
        recorded = as_str(as_dict(entries.get(node.index)).get("log_file")) or ""
        output = parent_logs.pop(recorded, None)
        if output is None:
            reports.append(node)
            continue
        output = dataclasses.replace(output, label="launcher output")
        reports.append(dataclasses.replace(node, logs=(output, *node.logs)))
    return dataclasses.replace(
        job,
        nodes=tuple(reports),
        platform_rows=_platform_rows(parent),
        logs=(*parent_logs.values(), *_records(parent)),
    )


def _job(
    top: Found,
    nodes: List[Tuple[int, Found]],
    *,
    simulated: bool,
    entries: Optional[Mapping[Optional[int], Dict[str, Any]]] = None,
) -> JobReport:
    reports = tuple(_node(index, found, (entries or {}).get(index)) for index, found in nodes)
    directories = {index: found.directory for index, found in nodes}

    def find(node: Optional[int], recorded: str) -> LogFile:
        base = directories.get(node, top.directory) if node is not None else top.directory
        return LogFile(recorded, locate(recorded, base))

    summaries = [(index, found.summary) for index, found in nodes]
    first = next((found for _, found in nodes if found.manifest.get("topology")), top)
    topology = as_dict(first.manifest.get("topology")) or as_dict(top.manifest.get("topology"))
    source = as_str(as_dict(top.manifest.get("topology")).get("source"))
    job_ids = [top.manifest.get("job_id"), topology.get("job_id")]
    job_ids += [found.manifest.get("job_id") for _, found in nodes]
    hangs = [as_dict(found.summary.get("hang")) for _, found in nodes]
    failures = tuple(_with_log(failure, reports) for failure in job_failures(summaries, find))
    return JobReport(
        directory=top.directory,
        simulated=simulated,
        topology=topology,
        source=source or as_str(topology.get("source")) or "?",
        framework=as_str(top.manifest.get("framework") or first.manifest.get("framework")),
        job_id=next((str(j) for j in job_ids if isinstance(j, str) and j), None),
        exit_code=as_int(top.summary.get("exit_code")),
        nodes=reports,
        failures=failures,
        hang=next((h for h in hangs if h), None),
        attempts=tuple(_attempts(summaries)),
        losses=losses_of(summaries),
    )


def _with_log(failure: Failure, nodes: Tuple[NodeReport, ...]) -> Failure:
    """A failure with its rank's log even when its record names none (a hang), and that
    log's last lines when the record has none and the log ends with that attempt."""
    rows = [row for node in nodes if node.index == failure.node for row in node.rows]
    rows = [row for row in rows if row.rank == failure.rank and row.role == failure.role]
    if failure.log is None and rows and failure.rank is not None:
        failure = dataclasses.replace(failure, log=rows[0].log)
    path = failure.log.path if failure.log else None
    last = rows[0].bars[-1].attempt if rows and rows[0].bars else None
    if failure.tail or path is None or last != failure.attempt:
        return failure
    tail, exception = log_tail(str(path), TAIL_LINES)
    return dataclasses.replace(failure, tail=tuple(tail), exception=failure.exception or exception)


def _node(index: int, found: Found, entry: Optional[Dict[str, Any]]) -> NodeReport:
    manifest, summary, directory = found.manifest, found.summary, found.directory
    arrivals = read_arrivals(directory / INDEX) if manifest else {}
    rows = rank_rows(index, manifest, summary, arrivals, lambda r: LogFile(r, locate(r, directory)))
    nodes = dicts(as_dict(manifest.get("topology")).get("nodes"))
    hosts = [as_str(n.get("host")) for n in nodes if as_int(n.get("index")) == index]
    attempts = attempts_of(index, manifest, summary)
    starts = [attempt.started for attempt in attempts if attempt.started is not None]
    ended = max((bar.end for row in rows for bar in row.bars), default=None)
    return NodeReport(
        index=index,
        host=as_str(manifest.get("host")) or next((h for h in hosts if h), None) or "?",
        directory=directory,
        exit_code=as_int(summary.get("exit_code")),
        stopped_by=as_dict(summary.get("stopped_by")) or None,
        launcher=node_bar(manifest, summary, rows, entry),
        rows=rows,
        attempt_starts=tuple(starts),
        phases=phases(summary.get("staging"), starts[0] if starts else None, ended),
        logs=_node_logs(found, rows),
    )


def _node_logs(found: Found, rows: Tuple[Row, ...]) -> Tuple[LogFile, ...]:
    """Each process's log, any other file the manifest lists, the stacks, the records."""
    logs = {row.log.recorded: dataclasses.replace(row.log, label=row.label) for row in rows}
    for log in _files(found):
        logs.setdefault(log.recorded, log)
    hang = as_dict(found.summary.get("hang"))
    stacks = sorted(found.directory.glob("stacks/attempt-*/*.txt"))
    for path in stacks:
        label = "stack " + path.relative_to(found.directory).as_posix()
        logs.setdefault(str(path), LogFile(str(path), path, label))
    stack_file = as_str(hang.get("stack_file"))
    listed = {log.path for log in logs.values()}
    if stack_file and locate(stack_file, found.directory) not in listed:
        logs[stack_file] = LogFile(stack_file, locate(stack_file, found.directory), "stack")
    return (*logs.values(), *_records(found))


def _files(found: Found) -> List[LogFile]:
    names = [name for name in found.manifest.get("files") or () if isinstance(name, str)]
    return [LogFile(name, locate(name, found.directory), Path(name).name) for name in names]


def _records(found: Found) -> Tuple[LogFile, ...]:
    paths = [found.directory / name for name in (SUMMARY, MANIFEST)]
    return tuple(LogFile(str(path), path, path.name) for path in paths if path.is_file())


def _parent_processes(parent: Found, *, nodes: bool) -> List[Dict[str, Any]]:
    return [p for p in dicts(parent.summary.get("processes")) if (p.get("role") == "node") == nodes]


def _platform_rows(parent: Found) -> Tuple[Row, ...]:
    """The simulation's own processes besides the nodes (the ModelArts rank-table writer)."""
    attempts = [
        {**a, "processes": [p for p in dicts(a.get("processes")) if p.get("role") != "node"]}
        for a in dicts(parent.manifest.get("attempts"))
    ]
    manifest = {**parent.manifest, "attempts": attempts}
    summary = {**parent.summary, "processes": _parent_processes(parent, nodes=False)}
    summary = summary if parent.summary else {}
    rows = rank_rows(0, manifest, summary, {}, lambda r: LogFile(r, locate(r, parent.directory)))
    return tuple(dataclasses.replace(row, node=None) for row in rows)


def losses_of(summaries: List[Tuple[int, Dict[str, Any]]]) -> Tuple[Loss, ...]:
    """Every loss any node recorded, once each (a new node 0 did not see its own)."""
    found: Dict[Tuple[int, int, float], Loss] = {}
    for _, summary in summaries:
        for entry in dicts(summary.get("attempts")):
            for loss in dicts(entry.get("losses")):
                attempt, node = as_int(entry.get("attempt")), as_int(loss.get("node"))
                lost_at, took = loss.get("lost_at"), loss.get("rejoin_seconds")
                if attempt is None or node is None or not isinstance(lost_at, (int, float)):
                    continue
                rejoined = lost_at + took if isinstance(took, (int, float)) else None
                key = (attempt, node, round(lost_at, 1))  # every node tells the same loss
                found.setdefault(key, Loss(attempt, node, lost_at, rejoined))
    return tuple(sorted(found.values(), key=lambda loss: loss.lost_at))


def _attempts(summaries: List[Tuple[int, Dict[str, Any]]]) -> List[Dict[str, Any]]:
    """The job's attempts as the first node with a summary saw them."""
    for _, summary in sorted(summaries, key=lambda item: item[0]):
        listed = dicts(summary.get("attempts"))
        if listed:
            return listed
    return []
