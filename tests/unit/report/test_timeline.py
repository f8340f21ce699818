"""The SVG timeline: rows, bars, markers and bands, and nothing from the run unescaped."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Dict, List

import pytest

from malaunch.report.collect import collect
from malaunch.report.model import JobReport
from malaunch.report.sections import attempts
from malaunch.report.timeline import _step, timeline_svg

from .runs import HOSTILE, T0, Launcher, iso, restarted_job

SVG = "{http://www.w3.org/2000/svg}"


def parse(job: JobReport) -> ET.Element:
    """The timeline as XML: it must be well-formed to parse at all."""
    return ET.fromstring(timeline_svg(job))


def rows(svg: ET.Element, kind: str) -> List[ET.Element]:
    return [g for g in svg.iter(f"{SVG}g") if g.get("class") == f"row {kind}"]


def bars(element: ET.Element) -> List[ET.Element]:
    return [r for r in element.iter(f"{SVG}rect") if (r.get("class") or "").startswith("bar ")]


def test_one_row_per_node_and_per_rank_one_bar_per_attempt(tmp_path: Path) -> None:
    svg = parse(collect(restarted_job(tmp_path / "sim")))
    assert [g.get("data-node") for g in rows(svg, "node")] == ["0", "1"]
    ranks = rows(svg, "rank")
    assert [(g.get("data-node"), g.get("data-rank")) for g in ranks] == [
        ("0", "0"), ("0", "1"), ("1", "2"), ("1", "3"),
    ]  # fmt: skip
    for row in ranks:
        assert [bar.get("data-attempt") for bar in bars(row)] == ["0", "1"]
    assert [bar.get("class") for bar in bars(ranks[3])] == ["bar failed", "bar ok"]
    assert [bar.get("class") for bar in bars(ranks[0])] == ["bar stopped", "bar ok"]
    assert len(bars(svg)) == 2 + 4 * 2  # the node launchers, then two attempts of each rank


def test_estimated_ends_are_dashed_and_every_bar_has_a_tooltip(tmp_path: Path) -> None:
    svg = parse(collect(restarted_job(tmp_path / "sim")))
    [failed] = [bar for bar in bars(svg) if bar.get("class") == "bar failed"]
    title = failed.find(f"{SVG}title")
    assert title is not None and title.text is not None
    assert title.text.startswith("rank 3 on node 1, attempt 0: exit 1 (failed)\n")
    assert "end estimated" in title.text
    dashed = [bar for bar in bars(svg) if bar.get("stroke-dasharray")]
    assert len(dashed) == 4  # attempt 0 of each rank; the rest were timed exactly
    assert all(bar.find(f"{SVG}title") is not None for bar in bars(svg))


def test_a_restart_is_marked_where_it_began(tmp_path: Path) -> None:
    svg = parse(collect(restarted_job(tmp_path / "sim")))
    markers = [g for g in svg.iter(f"{SVG}g") if g.get("class") == "marker"]
    assert [m.findtext(f"{SVG}text") for m in markers] == ["attempt 1"]


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    directory = Launcher(tmp_path / "logs", hosts=(HOSTILE,)).write()
    manifest = json.loads((directory / "malaunch-run.json").read_text())
    manifest["attempts"][0]["processes"][1]["role"] = "<img src=x onerror=alert(1)>"
    (directory / "malaunch-run.json").write_text(json.dumps(manifest))
    text = timeline_svg(collect(directory))
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    labels = [t.text for t in ET.fromstring(text).iter(f"{SVG}text")]
    assert f"node 0 · {HOSTILE}" in labels and "<img src=x onerror=alert(1)> 1" in labels


def test_staging_is_a_band_of_its_node_when_there_is_some(tmp_path: Path) -> None:
    staging = {"stage_in": {"start": iso(T0 - 3), "end": iso(T0 - 1), "bytes": 5}}
    with_staging = Launcher(tmp_path / "a", extra={"staging": staging}).write()
    svg = parse(collect(with_staging))
    [band] = rows(svg, "staging")
    phases = [r for r in band.iter(f"{SVG}rect") if r.get("class") == "phase"]
    assert len(phases) == 1
    assert phases[0].findtext(f"{SVG}title", "").startswith("stage_in: ")
    assert rows(parse(collect(Launcher(tmp_path / "b").write())), "staging") == []


def test_a_hang_marks_the_hung_rank_and_the_odd_ones_out(tmp_path: Path) -> None:
    hang = {"rank": 1, "node": 0, "role": "worker", "detected_at": T0 + 4, "culprits": [0]}
    failure = {"kind": "hang", "node": 0, "rank": 1, "role": "worker", "code": 124, "hang": hang}
    run = Launcher(
        tmp_path / "logs",
        endings={0: (None, "SIGTERM"), 1: (None, "SIGTERM")},
        failures={0: failure},
        exit_code=124,
        extra={"hang": hang},
        lines={1: [(T0 + 1, "step 1")]},
    )
    svg = parse(collect(run.write()))
    culprit, hung = rows(svg, "rank")
    assert culprit.findtext(f"{SVG}text") == "rank 0 (odd one out)"
    assert bars(culprit)[0].get("stroke-width") == "2"
    assert bars(hung)[0].get("class") == "bar hung"
    assert [line.get("class") for line in hung.iter(f"{SVG}line")] == ["silent-since"]
    markers = [g.findtext(f"{SVG}text") for g in svg.iter(f"{SVG}g") if g.get("class") == "marker"]
    assert markers == ["hang detected"]


def test_a_run_without_times_says_so(tmp_path: Path) -> None:
    job = collect(Launcher(tmp_path / "logs").write())
    empty = dataclasses.replace(job, nodes=(dataclasses.replace(job.nodes[0], launcher=None),))
    empty = dataclasses.replace(
        empty,
        nodes=tuple(
            dataclasses.replace(
                node, rows=tuple(dataclasses.replace(r, bars=()) for r in node.rows)
            )
            for node in empty.nodes
        ),
    )
    assert "no start or end time was recorded" in timeline_svg(empty)


@pytest.mark.parametrize(
    ("span", "step"), [(0.001, 0.0001), (1.0, 0.1), (7.0, 1.0), (30.0, 5.0), (3600.0, 500.0)]
)
def test_ticks_are_round_and_at_most_ten(span: float, step: float) -> None:
    assert _step(span) == pytest.approx(step)
    assert span / _step(span) <= 10


def with_losses(root: Path, losses: List[Dict[str, Any]]) -> Path:
    """The restarted job, its attempt 0 having lost nodes (as every node's summary says)."""
    directory = restarted_job(root)
    for node in (0, 1):
        path = directory / f"node-{node}" / "malaunch-summary.json"
        summary = json.loads(path.read_text())
        summary["attempts"][0]["losses"] = losses
        path.write_text(json.dumps(summary))
    return directory


def test_a_lost_node_and_its_replacement_are_marked_and_counted(tmp_path: Path) -> None:
    loss = {"node": 1, "lost_at": T0 + 2.0, "rejoin_seconds": 1.5}
    job = collect(with_losses(tmp_path / "sim", [loss]))
    [found] = job.losses
    assert (found.attempt, found.node, found.rejoined_at) == (0, 1, T0 + 3.5)  # told twice: once
    svg = parse(job)
    markers = {g.findtext(f"{SVG}text") for g in svg.iter(f"{SVG}g") if g.get("class") == "marker"}
    assert markers == {"attempt 1", "node 1 lost", "node 1 rejoined"}
    table = attempts(job)
    assert "<th>nodes lost</th>" in table and "<td>node 1, replaced after 1.5 s</td>" in table


def test_a_replacement_that_never_came_has_no_rejoin_mark(tmp_path: Path) -> None:
    loss = {"node": 1, "lost_at": T0 + 2.0, "rejoin_seconds": None}
    job = collect(with_losses(tmp_path / "sim", [loss]))
    svg = parse(job)
    markers = [g.findtext(f"{SVG}text") for g in svg.iter(f"{SVG}g") if g.get("class") == "marker"]
    assert "node 1 lost" in markers and "node 1 rejoined" not in markers
