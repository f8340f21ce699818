"""The HTML page: self-contained, escaped, its links relative to where it is written."""

from __future__ import annotations

import json
import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from malaunch.report.collect import collect
from malaunch.report.model import LogFile
from malaunch.report.page import render_page
from malaunch.report.sections import href, link
from malaunch.wording import spans

from .runs import HOSTILE, Launcher, exit_failure, restarted_job


class Elements(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: List[Tuple[str, Dict[str, Optional[str]]]] = []

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        self.tags.append((tag, dict(attrs)))


def elements(page: str) -> List[Tuple[str, Dict[str, Optional[str]]]]:
    parser = Elements()
    parser.feed(page)
    return parser.tags


def test_the_page_asks_for_nothing_from_anywhere(tmp_path: Path) -> None:
    page = render_page(collect(restarted_job(tmp_path / "sim")), tmp_path)
    tags = elements(page)
    assert not [tag for tag, _ in tags if tag in ("script", "link", "img", "iframe", "object")]
    assert not [attrs for _, attrs in tags if "src" in attrs]
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"]
    assert "url(" not in page and "@import" not in page


def test_sections_of_a_failed_then_restarted_job(tmp_path: Path) -> None:
    page = render_page(collect(restarted_job(tmp_path / "sim")), tmp_path)
    ids = [attrs.get("id") for tag, attrs in elements(page) if tag in ("section", "article")]
    assert ids == [
        "topology", "timeline", "failures", "failure-0", "attempts", "node-0", "node-1",
        "simulation",
    ]  # fmt: skip
    assert "Failure before a restart" in page
    assert "rank 3 on node 1 exited with code 1" in page


def test_a_hostile_log_line_is_shown_as_text(tmp_path: Path) -> None:
    page = render_page(collect(restarted_job(tmp_path / "sim")), tmp_path)
    assert HOSTILE not in page and "<script" not in page
    assert "ValueError: rank 3 broke &lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_every_link_is_relative_and_names_an_existing_file(tmp_path: Path) -> None:
    root = tmp_path / "sim"
    out_dir = tmp_path / "out"
    out_dir.mkdir()  # a link through a missing folder would not resolve
    page = render_page(collect(restarted_job(root)), out_dir)
    links = [attrs["href"] for tag, attrs in elements(page) if tag == "a"]
    files = [link for link in links if link and not link.startswith("#")]
    assert "../sim/node-1/worker-3.log" in files
    assert all((out_dir / link).is_file() for link in files)
    assert len(set(files)) == 2 * 5 + 2  # per node: output, 2 ranks, 2 records; the parent's


def test_a_missing_log_is_named_not_linked(tmp_path: Path) -> None:
    directory = Launcher(tmp_path / "logs").write()
    (directory / "worker-1.log").unlink()
    page = render_page(collect(directory), tmp_path)
    assert f"(not found: {directory / 'worker-1.log'})" in page
    assert 'href="logs/worker-1.log"' not in page and 'href="logs/worker-0.log"' in page


def test_links_relative_when_they_share_a_folder_else_file_urls() -> None:
    assert href(Path("/data/run/node-1/w.log"), Path("/data/reports")) == "../run/node-1/w.log"
    assert href(Path("/srv/logs/w 1#.log"), Path("/home/me")) == "file:///srv/logs/w%201%23.log"
    assert href(Path("/data/a b/w#1.log"), Path("/data")) == "a%20b/w%231.log"
    log = LogFile('/data/"x".log', Path('/data/"x".log'), label="<b>")
    assert link(log, Path("/data")) == (
        '<a class="log" href="%22x%22.log">&lt;b&gt;</a> <code>/data/&quot;x&quot;.log</code>'
    )


def test_a_damaged_run_still_renders(tmp_path: Path) -> None:
    directory = Launcher(tmp_path / "logs").write()
    manifest = json.loads((directory / "malaunch-run.json").read_text())
    manifest["topology"] = {"nodes": [{"index": "0", "devices": "many", "host": 5}], "roles": 3}
    manifest["attempts"][0]["processes"][0].update(rank="0", pid=True, file=None)
    (directory / "malaunch-run.json").write_text(json.dumps(manifest))
    summary = {"exit_code": 1, "attempts": [{"attempt": 0, "failure": {"kind": 5, "tail": "x"}}]}
    (directory / "malaunch-summary.json").write_text(json.dumps(summary))
    page = render_page(collect(directory), tmp_path)
    assert "<h2>Topology</h2>" in page and 'id="failure-0"' in page


def test_rank_spans() -> None:
    assert spans([3, 0, 1, 2, 5, 7, 8]) == "0-3,5,7-8"
    assert spans([]) == ""


def test_the_structured_error_of_a_recorded_rank_is_shown_escaped(tmp_path: Path) -> None:
    log = str(tmp_path / "logs" / "worker-1.log")
    failure = exit_failure(0, 1, 3, log, ["step 1"])
    failure["error"] = {
        "type": "ValueError",
        "message": f"bad batch {HOSTILE}",
        "frame": 'File "/job/train.py", line 12, in step',
        "code": "raise ValueError(n)",
        "timestamp": "2026-01-02T03:04:05+00:00",
        "file": str(tmp_path / "logs" / "worker-1.error.json"),
    }
    run = Launcher(tmp_path / "logs", ranks=(0, 1), endings={1: (3, None)},
                   failures={0: failure}, exit_code=3)  # fmt: skip
    job = collect(run.write())
    assert job.failures[0].error is not None
    assert job.failures[0].error["type"] == "ValueError"
    page = render_page(job, tmp_path)
    assert "<h4>Its error (@record)</h4>" in page
    assert f"ValueError: bad batch {escape(HOSTILE)}" in page
    assert HOSTILE not in page
    assert escape('File "/job/train.py", line 12, in step raise ValueError(n)') in page
    assert "2026-01-02T03:04:05+00:00" in page


def test_a_malformed_error_in_a_summary_is_left_out(tmp_path: Path) -> None:
    failure = exit_failure(0, 1, 3, str(tmp_path / "logs" / "worker-1.log"), ["step 1"])
    failure["error"] = {"type": 7, "message": ["not", "text"]}
    run = Launcher(tmp_path / "logs", ranks=(0, 1), endings={1: (3, None)},
                   failures={0: failure}, exit_code=3)  # fmt: skip
    job = collect(run.write())
    assert job.failures[0].error is None
    assert "Its error (@record)" not in render_page(job, tmp_path)
