"""The report page: one self-contained HTML document (inline CSS and SVG, no script, no
request to anywhere), built from a :class:`JobReport`.

Strings are built with ``html.escape``: every value taken from the run (names, hosts, paths,
log lines) is escaped, so a rank that prints ``<script>`` shows it as text.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from malaunch import __version__
from malaunch.report import sections
from malaunch.report.failures import describe
from malaunch.report.model import JobReport, LogFile, NodeReport, Row
from malaunch.report.read import as_dict, as_int, as_list, as_str, dicts
from malaunch.report.timeline import ESTIMATED, clock, outcome_colours, seconds, timeline_svg
from malaunch.wording import plural, spans

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1d232a; margin: 24px auto;
       max-width: 1120px; padding: 0 16px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px;
     border-bottom: 1px solid #d8dde3; padding-bottom: 4px; } h3 { font-size: 15px; }
h4 { font-size: 13px; margin: 12px 0 4px; color: #444; }
table { border-collapse: collapse; margin: 6px 0; } th, td { text-align: left;
        padding: 3px 10px 3px 0; vertical-align: top; border-bottom: 1px solid #eef0f3; }
table.facts th { color: #555; font-weight: normal; width: 150px; }
pre { background: #f5f6f8; border: 1px solid #e1e4e8; padding: 8px 10px; overflow-x: auto;
      white-space: pre-wrap; word-break: break-all; font-size: 12px; margin: 4px 0; }
pre.exception { border-left: 4px solid #d64545; }
code { font-size: 12px; color: #555; }
.status { display: inline-block; border-radius: 4px; padding: 1px 8px; color: #fff;
          font-size: 14px; vertical-align: middle; }
.status.ok { background: #2f9e5b; } .status.failed { background: #d64545; }
.status.unknown { background: #97a1ad; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
            vertical-align: -1px; border-radius: 2px; }
.scroll { overflow-x: auto; } .note { color: #666; font-size: 12px; }
.missing { color: #a33; } ul.logs { padding-left: 18px; } ul.logs li { margin: 2px 0; }
article.failure { margin-bottom: 18px; }
"""


def render_page(job: JobReport, base: Path) -> str:
    """The whole document; links are relative to ``base``, the page's directory."""
    title = f"malaunch report: {job.job_id or job.directory.name}"
    body = [
        _header(job),
        _topology(job),
        _timeline(job),
        sections.failures(job, base),
        sections.hang(job, base),
        sections.attempts(job),
        *(_node(node, base) for node in job.nodes),
        _simulation(job, base),
        f'<p class="note">written by malaunch {escape(__version__)}</p>',
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # The page asks for nothing: no script, no fetch, no image, no font from anywhere.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body></html>\n"
    )


def _header(job: JobReport) -> str:
    code = job.exit_code
    state = "unknown" if code is None else ("ok" if code == 0 else "failed")
    status = "no summary" if code is None else f"exit code {code}"
    processes = sum(len(node.rows) for node in job.nodes)
    facts = [
        job.job_id or "",
        job.framework or "",
        plural(len(job.nodes), "node"),
        plural(processes, "process"),
        plural(max(len(job.attempts), 1), "attempt"),
    ]
    parts = [
        f'<h1>malaunch report <span class="status {state}">{escape(status)}</span></h1>',
        f"<p>{escape(' · '.join(fact for fact in facts if fact))}<br>",
        f"<code>{escape(str(job.directory))}</code></p>",
    ]
    if job.failures:
        first = job.failures[-1] if code else job.failures[0]
        parts.append(
            f"<p>{'Failure' if code else 'Failure before a restart'}: "
            f'<a href="#failure-{first.attempt}">{escape(describe(first))}</a> '
            f"(attempt {first.attempt})</p>"
        )
    return "".join(parts)


def _topology(job: JobReport) -> str:
    topology = job.topology
    master = as_str(topology.get("master_addr")) or "-"
    port = as_int(topology.get("master_port"))
    nodes = dicts(topology.get("nodes"))
    source = as_str(topology.get("source")) or job.source
    facts: List[Tuple[str, str]] = [
        ("source", f"{source} (simulated: {job.source})" if job.simulated else source),
        ("job id", job.job_id or "-"),
        ("framework", job.framework or "-"),
        ("master", f"{master}:{port}" if port is not None else master),
        ("nodes", str(len(nodes) or len(job.nodes))),
        ("world size", str(sum(len(dicts(node.get("devices"))) for node in nodes) or "-")),
    ]
    if as_str(topology.get("rank_table_file")):
        facts.append(("rank table", str(topology["rank_table_file"])))
    for role, hosts in as_dict(topology.get("roles")).items():
        facts.append((str(role), ", ".join(str(host) for host in as_list(hosts))))
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    head = "<tr><th>node</th><th>host</th><th>name</th><th>role</th><th>ranks</th>"
    head += "<th>devices</th></tr>"
    listed = "".join(_topology_node(node) for node in nodes)
    table = f'<table class="nodes">{head}{listed}</table>' if listed else ""
    facts_table = f'<table class="facts">{rows}</table>'
    return f'<section id="topology"><h2>Topology</h2>{facts_table}{table}</section>'


def _topology_node(node: Dict[str, Any]) -> str:
    devices = dicts(node.get("devices"))
    ranks = spans([r for r in (as_int(d.get("rank")) for d in devices) if r is not None])
    ids = ",".join(str(d.get("device_id")) for d in devices)
    cells = [node.get("index"), node.get("host"), node.get("name"), node.get("role"), ranks, ids]
    text = ["-" if cell in (None, "") else str(cell) for cell in cells]
    return "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in text) + "</tr>"


def _timeline(job: JobReport) -> str:
    legend = "".join(
        f'<span><i style="background:{colour}"></i>{escape(outcome)}</span>'
        for outcome, colour in outcome_colours()
    )
    note = (
        "One row per node (the launcher's life) and per process, one bar per attempt; hover "
        f"a bar for its times. Dashed outline: {ESTIMATED}. Black outline: named an odd one "
        "out of a hang; black tick: a hung rank's last output."
    )
    return (
        '<section id="timeline"><h2>Timeline</h2>'
        f'<div class="scroll">{timeline_svg(job)}</div>'
        f'<p class="legend">{legend}</p><p class="note">{escape(note)}</p></section>'
    )


def _node(node: NodeReport, base: Path) -> str:
    state = "no summary" if node.exit_code is None else f"exit code {node.exit_code}"
    parts = [
        f'<section class="node" id="node-{node.index}">',
        f"<h2>Node {node.index} · {escape(node.host)}</h2>",
        f"<p>{escape(state)}{_stopped(node.stopped_by)} · <code>{escape(str(node.directory))}"
        "</code></p>",
        _processes(node.rows, base),
        _phases(node),
        "<h3>Files</h3>",
        _files(node.logs, base),
        "</section>",
    ]
    return "".join(parts)


def _stopped(stopped_by: Optional[Dict[str, Any]]) -> str:
    if not stopped_by:
        return ""
    node, rank = stopped_by.get("node"), stopped_by.get("rank")
    who = f"node {node} rank {rank}" if rank is not None else f"node {node}"
    return f", stopped because {who} failed ({stopped_by.get('kind')})"


def _processes(rows: Tuple[Row, ...], base: Path) -> str:
    if not rows:
        return "<p>No process was recorded.</p>"
    head = "<tr><th>process</th><th>attempts</th><th>pid</th><th>start</th><th>time</th>"
    head += "<th>ended</th><th>log</th></tr>"
    lines = []
    for row in rows:
        cells = [row.label, "0", "-", "-", "-", "-"]
        if row.bars:
            last = row.bars[-1]  # the attempt the process ran last in
            cells = [row.label, str(len(row.bars)), str(last.pid or "-"), clock(last.start)]
            cells += [seconds(last.end - last.start), f"{last.ending} ({last.outcome})"]
        text = "".join(f"<td>{escape(cell)}</td>" for cell in cells)
        lines.append(f"<tr>{text}<td>{sections.link(row.log, base, 'log')}</td></tr>")
    return f'<table class="processes">{head}{"".join(lines)}</table>'


def _phases(node: NodeReport) -> str:
    if not node.phases:
        return ""
    rows = [
        (phase.name, clock(phase.start), seconds(phase.end - phase.start), phase.detail)
        for phase in node.phases
    ]
    cells = "".join(
        "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    head = "<tr><th>phase</th><th>start</th><th>time</th><th>detail</th></tr>"
    return f'<h3>Staging</h3><table class="staging">{head}{cells}</table>'


def _files(logs: Iterable[LogFile], base: Path) -> str:
    items = "".join(f"<li>{sections.link(log, base)}</li>" for log in logs)
    return f'<ul class="logs">{items}</ul>' if items else "<p>No file was recorded.</p>"


def _simulation(job: JobReport, base: Path) -> str:
    if not job.simulated:
        return ""
    parts = ['<section id="simulation"><h2>Simulation</h2>']
    if job.platform_rows:
        parts.append(_processes(job.platform_rows, base))
    parts += ["<h3>Files</h3>", _files(job.logs, base), "</section>"]
    return "".join(parts)
