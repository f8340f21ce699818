"""The page's sections about what went wrong: failures, the hang, the attempts.

Each function returns an HTML fragment; every string taken from the run goes through
``escape`` (log lines and names come from users).
"""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any, Dict, List, Optional
from urllib.parse import quote

from malaunch.report.failures import describe
from malaunch.report.model import Failure, JobReport, LogFile
from malaunch.report.read import as_dict, as_int, as_list, as_str, dicts, moment
from malaunch.report.timeline import clock, seconds
from malaunch.wording import plural


def href(path: Path, base: Path) -> str:
    """A link to ``path`` from a page in ``base``: relative when they share more than the
    root (the page then survives moving both), else a file:// URL."""
    target, base = path.absolute(), base.absolute()
    if os.path.commonpath([target, base]) != target.anchor:
        return quote(Path(os.path.relpath(target, base)).as_posix())
    return target.as_uri()


def link(log: Optional[LogFile], base: Path, label: str = "") -> str:
    """An ``<a>`` to a file of the run; a missing one is named, not linked."""
    if log is None:
        return '<span class="missing">none recorded</span>'
    text = escape(label or log.label or Path(log.recorded).name or log.recorded)
    if log.path is None:
        return f'<span class="missing">{text} (not found: {escape(log.recorded)})</span>'
    target = escape(href(log.path, base))
    return f'<a class="log" href="{target}">{text}</a> <code>{escape(str(log.path))}</code>'


def failures(job: JobReport, base: Path) -> str:
    """Each attempt's failure: who, the decision taken, its log, exception and last lines."""
    if not job.failures:
        return ""
    title = "Failure" if len(job.failures) == 1 else f"Failures ({len(job.failures)} attempts)"
    parts = [f'<section id="failures"><h2>{title}</h2>']
    parts += [_failure(failure, base) for failure in job.failures]
    return "".join(parts) + "</section>"


def _failure(failure: Failure, base: Path) -> str:
    parts = [
        f'<article class="failure" id="failure-{failure.attempt}">',
        f"<h3>Attempt {failure.attempt}: {escape(describe(failure))}</h3>",
        "<p>",
        f"decision: {escape(failure.decision)} · " if failure.decision else "",
        f"log: {link(failure.log, base)}</p>",
    ]
    if failure.error:
        parts.append(_error(failure.error))
    if failure.exception:
        parts.append("<h4>Python exception</h4>")
        parts.append(f'<pre class="exception">{escape(failure.exception)}</pre>')
    if failure.tail:
        parts.append(f"<h4>Last {plural(len(failure.tail), 'line')} of its log</h4>")
        parts.append(f'<pre class="tail">{escape(chr(10).join(failure.tail))}</pre>')
    elif failure.kind == "exit":
        parts.append("<p>Its log had no lines.</p>")
    parts.append("</article>")
    return "".join(parts)


def _error(error: Dict[str, str]) -> str:
    """The structured error a rank's ``@record`` wrote (torchrun's ChildFailedError facts)."""
    kind = error.get("type")
    facts = [
        ("exception", f"{kind}: {error['message']}" if kind else error["message"]),
        ("raised in", " ".join(filter(None, (error.get("frame"), error.get("code"))))),
        ("at", error.get("timestamp") or ""),
        ("error file", error.get("file") or ""),
    ]
    rows = "".join(
        f"<tr><th>{escape(name)}</th><td>{escape(value)}</td></tr>"
        for name, value in facts
        if value
    )
    return f'<h4>Its error (@record)</h4><table class="facts error">{rows}</table>'


def hang(job: JobReport, base: Path) -> str:
    """The hang record: the silent rank, the odd ones out, every innermost frame."""
    record = job.hang or next((f.hang for f in job.failures if f.hang), None)
    if not record:
        return ""
    culprits = [str(rank) for rank in as_list(record.get("culprits"))]
    silent = record.get("seconds_silent")
    detected = moment(record.get("detected_at"))
    facts = [
        ("silent rank", f"rank {record.get('rank')} on node {record.get('node')}"),
        ("silent for", seconds(silent) if isinstance(silent, (int, float)) else "?"),
        ("detected at", clock(detected) if detected is not None else "?"),
        ("odd ones out", ", ".join(culprits) or "none singled out"),
        ("why", str(record.get("reason") or "")),
    ]
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    stack = _stack_file(job, as_str(record.get("stack_file")))
    parts = ['<section id="hang"><h2>Hang</h2><table class="facts">', rows]
    parts.append(f"<tr><th>its stack</th><td>{link(stack, base)}</td></tr></table>")
    parts.append(_groups(record))
    return "".join(parts) + "</section>"


def _stack_file(job: JobReport, recorded: Optional[str]) -> Optional[LogFile]:
    if not recorded:
        return None
    logs = [log for node in job.nodes for log in node.logs]
    same = [log for log in logs if log.recorded == recorded]
    tails = [log for log in logs if log.path and recorded.endswith(log.path.name)]
    return (same or tails or [LogFile(recorded, None)])[0]


def _groups(record: Dict[str, Any]) -> str:
    groups = dicts(record.get("groups"))
    if not groups:
        return ""
    rows = []
    for group in groups:
        ranks = ", ".join(str(rank) for rank in as_list(group.get("ranks")))
        rows.append(f"<tr><td><code>{escape(str(group.get('frame')))}</code></td>")
        rows.append(f"<td>{escape(ranks)}</td></tr>")
    head = "<h3>Where each rank was</h3><table><tr><th>innermost frame</th><th>ranks</th></tr>"
    return head + "".join(rows) + "</table>"


def attempts(job: JobReport) -> str:
    """One row per attempt: its exit code, its failure, the decision taken."""
    if not job.attempts:
        return ""
    by_attempt = {failure.attempt: failure for failure in job.failures}
    rows: List[str] = []
    for entry in job.attempts:
        number = as_int(entry.get("attempt"))
        failure = by_attempt.get(number) if number is not None else None
        # The job's code is its failure's: the first node's summary says 75 for an attempt
        # another node's rank ended with 7.
        code = failure.code if failure is not None and failure.code is not None else None
        cells = [
            str(number if number is not None else "?"),
            str(entry.get("exit_code") if code is None else code),
            describe(failure) if failure else "-",
            str(entry.get("decision") or "-"),
            _delay(as_dict(entry).get("delay")),
            _losses(job, number),
        ]
        rows.append("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>")
    head = "<tr><th>attempt</th><th>exit code</th><th>failure</th><th>decision</th>"
    head += "<th>restart delay</th><th>nodes lost</th></tr>"
    return f'<section id="attempts"><h2>Attempts</h2><table>{head}{"".join(rows)}</table></section>'


def _losses(job: JobReport, attempt: Optional[int]) -> str:
    """``node 2, replaced after 4.1 s`` for each node the attempt lost."""
    said = []
    for loss in (loss for loss in job.losses if loss.attempt == attempt):
        took = loss.rejoined_at - loss.lost_at if loss.rejoined_at is not None else None
        said.append(
            f"node {loss.node}, "
            + (f"replaced after {seconds(took)}" if took is not None else "never replaced")
        )
    return "; ".join(said) or "-"


def _delay(value: Any) -> str:
    return seconds(float(value)) if isinstance(value, (int, float)) and value > 0 else "-"
