"""The job's timeline as inline SVG: a pure function of the collected report.

x is wall-clock time, shared by the whole job. Each node has a row of its own (the node
launcher's life), a staging row when its summary has staging phases, then one row per
process of its plan; each row has one bar per attempt, coloured by how the process ended,
with a tooltip (``<title>``) saying so. Dashed lines mark where each restart began, when a
hang was detected, and when a node was lost and its replacement joined. Every string taken
from the run is escaped.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from html import escape
from typing import Iterator, List, Optional, Sequence, Tuple

from malaunch.report.model import (
    FAILED,
    HUNG,
    OK,
    STOPPED,
    UNKNOWN,
    Bar,
    JobReport,
    Phase,
    Row,
)
from malaunch.report.read import moment

LABEL_WIDTH = 190
CHART_WIDTH = 880
ROW_HEIGHT = 22
BAR_HEIGHT = 14
AXIS_HEIGHT = 40
WIDTH = LABEL_WIDTH + CHART_WIDTH + 20
CHAR_WIDTH = 6.4  # of the 11 px labels drawn inside bars, to know when one fits
COLOURS = {
    OK: "#2f9e5b",
    FAILED: "#d64545",
    STOPPED: "#97a1ad",
    HUNG: "#8e44ad",
    UNKNOWN: "#c9cdd3",
}
PHASE_COLOUR = "#3b7fc4"
ESTIMATED = "end estimated: the launcher records exact times for the last attempt only"


@dataclass(frozen=True)
class Line:
    """One row of the drawing."""

    kind: str  # "node", "staging", "rank" or "platform"
    label: str
    node: Optional[int] = None
    rank: Optional[int] = None
    bars: Tuple[Bar, ...] = ()
    phases: Tuple[Phase, ...] = ()
    culprit: bool = False


@dataclass(frozen=True)
class Scale:
    """Seconds since the epoch to x pixels."""

    start: float
    span: float

    def x(self, moment_: float) -> float:
        return LABEL_WIDTH + (moment_ - self.start) / self.span * CHART_WIDTH


def lines(job: JobReport) -> List[Line]:
    """The rows, grouped by node: the node, its staging, its processes; then the platform."""
    found: List[Line] = []
    for node in job.nodes:
        bars = (node.launcher,) if node.launcher else ()
        found.append(Line("node", f"node {node.index} · {node.host}", node.index, None, bars))
        if node.phases:
            found.append(Line("staging", "staging", node.index, phases=node.phases))
        found += [_rank_line(row) for row in node.rows]
    found += [_rank_line(row, "platform") for row in job.platform_rows]
    return found


def _rank_line(row: Row, kind: str = "rank") -> Line:
    label = f"{row.label} (odd one out)" if row.culprit else row.label
    return Line(kind, label, row.node, row.rank, row.bars, culprit=row.culprit)


def timeline_svg(job: JobReport) -> str:
    """The ``<svg>`` element of the job's timeline."""
    rows = lines(job)
    markers = _markers(job)
    scale = _scale(rows, [at for at, _ in markers])
    height = AXIS_HEIGHT + len(rows) * ROW_HEIGHT + 8
    head = (
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="timeline of {len(rows)} rows" font-family="sans-serif" font-size="12">'
    )
    if scale is None:
        return f'{head}<text x="10" y="24">no start or end time was recorded</text></svg>'
    body = [*_axis(scale, height)]
    for index, line in enumerate(rows):
        body.append(_row(line, scale, AXIS_HEIGHT + index * ROW_HEIGHT, index))
    body += [_marker(scale, at, text, height) for at, text in markers]
    return head + "".join(body) + "</svg>"


def _markers(job: JobReport) -> List[Tuple[float, str]]:
    """Where restarts began (as the first node saw it) and when a hang was detected."""
    found: List[Tuple[float, str]] = []
    starts = next((node.attempt_starts for node in job.nodes if node.attempt_starts), ())
    found += [(at, f"attempt {number}") for number, at in enumerate(starts) if number]
    detected = moment((job.hang or {}).get("detected_at"))
    if detected is not None:
        found.append((detected, "hang detected"))
    for loss in job.losses:
        found.append((loss.lost_at, f"node {loss.node} lost"))
        if loss.rejoined_at is not None:
            found.append((loss.rejoined_at, f"node {loss.node} rejoined"))
    return found


def _scale(rows: Sequence[Line], extra: Sequence[float]) -> Optional[Scale]:
    times = [t for line in rows for bar in line.bars for t in (bar.start, bar.end)]
    times += [t for line in rows for phase in line.phases for t in (phase.start, phase.end)]
    times += list(extra)
    if not times:
        return None
    start, end = min(times), max(times)
    return Scale(start, max(end - start, 0.001))


def _axis(scale: Scale, height: int) -> Iterator[str]:
    step = _step(scale.span)
    yield (
        f'<text class="axis-title" x="8" y="16" fill="#555">t = 0 at {escape(clock(scale.start))}'
        "</text>"
    )
    for number in range(int(scale.span / step) + 1):
        x = scale.x(scale.start + number * step)
        yield (
            f'<line class="tick" x1="{x:.1f}" y1="{AXIS_HEIGHT - 8}" x2="{x:.1f}" y2="{height}" '
            f'stroke="#e3e6ea"/><text x="{x:.1f}" y="{AXIS_HEIGHT - 12}" text-anchor="middle" '
            f'fill="#555">{escape(seconds(number * step))}</text>'
        )


def _step(span: float) -> float:
    """A round tick step giving at most ten ticks."""
    base = 10 ** math.floor(math.log10(span / 10)) if span > 0 else 1.0
    return next(base * m for m in (1, 2, 5, 10) if span / (base * m) <= 10)


def _row(line: Line, scale: Scale, y: int, index: int) -> str:
    node = "" if line.node is None else f' data-node="{line.node}"'
    rank = "" if line.rank is None else f' data-rank="{line.rank}"'
    band = "#eef1f5" if line.kind == "node" else ("#f6effa" if line.culprit else "")
    band = band or ("#fafbfc" if index % 2 else "")
    parts = [f'<g class="row {line.kind}"{node}{rank} transform="translate(0,{y})">']
    if band:
        parts.append(f'<rect x="0" y="0" width="{WIDTH}" height="{ROW_HEIGHT}" fill="{band}"/>')
    weight = ' font-weight="bold"' if line.kind == "node" else ""
    parts.append(f'<text class="label" x="8" y="15"{weight}>{escape(line.label)}</text>')
    parts += [_bar(line, bar, scale) for bar in line.bars]
    parts += [_phase(phase, scale) for phase in line.phases]
    parts.append("</g>")
    return "".join(parts)


def _bar(line: Line, bar: Bar, scale: Scale) -> str:
    x, end = scale.x(bar.start), scale.x(bar.end)
    width = max(end - x, 2.0)
    top = (ROW_HEIGHT - BAR_HEIGHT) / 2
    outline = "" if bar.exact else ' stroke="#333" stroke-width="1" stroke-dasharray="3,2"'
    if bar.culprit:
        outline = ' stroke="#000" stroke-width="2"'
    parts = [
        f'<rect class="bar {bar.outcome}" data-attempt="{bar.attempt}" x="{x:.1f}" '
        f'y="{top:.1f}" width="{width:.1f}" height="{BAR_HEIGHT}" rx="2" '
        f'fill="{COLOURS.get(bar.outcome, COLOURS[UNKNOWN])}"{outline}>'
        f"<title>{escape(_tooltip(line, bar))}</title></rect>"
    ]
    if bar.outcome == HUNG and bar.last_output is not None:
        silent = scale.x(bar.last_output)
        parts.append(
            f'<line class="silent-since" x1="{silent:.1f}" y1="1" x2="{silent:.1f}" '
            f'y2="{ROW_HEIGHT - 1}" stroke="#000" stroke-width="2"/>'
        )
    text = f"#{bar.attempt} {bar.ending}"
    if len(text) * CHAR_WIDTH + 6 <= width:
        parts.append(
            f'<text x="{x + 4:.1f}" y="15" font-size="11" fill="#fff" '
            f'pointer-events="none">{escape(text)}</text>'
        )
    return "".join(parts)


def _tooltip(line: Line, bar: Bar) -> str:
    where = f" on node {line.node}" if line.node is not None and line.kind != "node" else ""
    text = f"{line.label}{where}, attempt {bar.attempt}: {bar.ending} ({bar.outcome})\n"
    text += f"{clock(bar.start)} to {clock(bar.end)}, {seconds(bar.end - bar.start)}"
    if bar.pid is not None:
        text += f", pid {bar.pid}"
    if bar.last_output is not None:
        text += f"\nlast output at {clock(bar.last_output)}"
    if bar.culprit:
        text += "\nnamed an odd one out: its stack differs from most ranks'"
    return text if bar.exact else f"{text}\n{ESTIMATED}"


def _phase(phase: Phase, scale: Scale) -> str:
    x = scale.x(phase.start)
    width = max(scale.x(phase.end) - x, 2.0)
    top = (ROW_HEIGHT - BAR_HEIGHT) / 2
    tip = f"{phase.name}: {clock(phase.start)} to {clock(phase.end)}, "
    tip += seconds(phase.end - phase.start) + (f"\n{phase.detail}" if phase.detail else "")
    label = ""
    if len(phase.name) * CHAR_WIDTH + 6 <= width:
        label = (
            f'<text x="{x + 4:.1f}" y="15" font-size="11" fill="#fff" '
            f'pointer-events="none">{escape(phase.name)}</text>'
        )
    return (
        f'<rect class="phase" x="{x:.1f}" y="{top:.1f}" width="{width:.1f}" '
        f'height="{BAR_HEIGHT}" rx="2" fill="{PHASE_COLOUR}" fill-opacity="0.8">'
        f"<title>{escape(tip)}</title></rect>{label}"
    )


def _marker(scale: Scale, at: float, text: str, height: int) -> str:
    x = scale.x(at)
    colour = "#d64545" if text.startswith("hang") or text.endswith(" lost") else "#555"
    colour = "#2f9e5b" if text.endswith(" rejoined") else colour
    # Near the right edge the label goes left of its line, so that it stays in the picture.
    late = x > LABEL_WIDTH + CHART_WIDTH * 0.85
    anchor = f'x="{x - 3:.1f}" text-anchor="end"' if late else f'x="{x + 3:.1f}"'
    return (
        f'<g class="marker"><line x1="{x:.1f}" y1="{AXIS_HEIGHT - 6}" x2="{x:.1f}" '
        f'y2="{height}" stroke="{colour}" stroke-dasharray="5,3"/>'
        f'<text {anchor} y="{AXIS_HEIGHT - 1}" font-size="10" fill="{colour}">'
        f"{escape(text)}</text><title>{escape(text)} at {escape(clock(at))}</title></g>"
    )


def clock(at: float) -> str:
    """A moment as this machine's local time of day, to the millisecond."""
    moment_ = datetime.datetime.fromtimestamp(at).astimezone()
    return moment_.strftime("%H:%M:%S.") + f"{moment_.microsecond // 1000:03d}"


def seconds(value: float) -> str:
    """A duration or an offset, in seconds (or minutes and hours when long)."""
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.3g} s" if value < 10 else f"{value:.0f} s"


def outcome_colours() -> List[Tuple[str, str]]:
    """The legend: each outcome and its colour."""
    return [(outcome, COLOURS[outcome]) for outcome in (OK, FAILED, STOPPED, HUNG, UNKNOWN)]
