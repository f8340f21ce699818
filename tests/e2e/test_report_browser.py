"""`malaunch report`'s page in a real headless browser: Debian's chromium driven by playwright.

Real runs through the installed command (a simulated 2 x 2 job whose rank 3 raises in its
first attempt only, so it has two attempts; a failing single-node run), then the page as
chromium renders it: one timeline row per rank with a bar per attempt, the failure with its
exception, log links that resolve to files, no request leaving the machine, a screenshot.

playwright drives the system's chromium (``/usr/bin/chromium``); it never downloads its own
(``playwright install`` cannot work offline). ``scripts/test.sh`` installs chromium with
apt-get when it is missing and it runs as root; without a browser this test skips, saying so
(without playwright, which the test extra installs, it fails).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterator, List
from urllib.parse import unquote, urlparse

import pytest

from malaunch.testing import run_cli

CHROMIUM = Path("/usr/bin/chromium")
# Headless, and nothing chromium would fetch for itself (updates, sync, first-run pages).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
PNG = b"\x89PNG\r\n\x1a\n"

# Every rank prints a line a browser would run if it were not escaped; rank 3 raises in
# attempt 0 only, so attempt 1 succeeds.
WORKER = """\
import os
rank, attempt = os.environ["RANK"], os.environ.get("MALAUNCH_RESTART_COUNT", "0")
print(f"rank {rank} attempt {attempt} <script>alert(1)</script>", flush=True)
if rank == "3" and attempt == "0":
    raise ValueError("rank 3 broke in attempt 0")
"""
FAILING = """\
import os, sys
print(f"rank {os.environ['RANK']} <img src=x onerror=alert(2)>", flush=True)
sys.exit(3 if os.environ["RANK"] == "1" else 0)
"""


def _sync_playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415 (skip when missing)
    except ImportError:  # it is in the test extra: missing means the test kit is incomplete
        pytest.fail("playwright is not installed: pip install '.[test]' (scripts/test.sh does)")
    if not CHROMIUM.exists():
        pytest.skip(
            f"no browser: {CHROMIUM} is missing; scripts/test.sh installs it as root "
            "(apt-get install chromium)"
        )
    return sync_playwright


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with _sync_playwright()() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulated job's log dir and its report."""
    root = tmp_path_factory.mktemp("restarted")
    args = ["simulate", "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano"]
    args += ["--framework", "torch_ddp", "--max-restarts", "1", "--restart-backoff", "0"]
    args += ["--log-dir", str(root / "logs"), "--", sys.executable, "-c", WORKER]
    result = run_cli(args, timeout=90)
    assert result.code == 0, result.stderr
    return report(root / "logs", root / "reports" / "job.html")


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("single")
    args = ["--framework", "torch_ddp", "--nproc-per-node", "2", "--log-dir", str(root / "logs")]
    result = run_cli([*args, "--", sys.executable, "-c", FAILING])
    assert result.code == 3, result.stderr
    return report(root / "logs", root / "single.html")


def report(log_dir: Path, out: Path) -> Path:
    result = run_cli(["report", str(log_dir), "--html", str(out)])
    assert result.code == 0, result.stderr
    return out


class Visit:
    """A page opened in a fresh context, with every request it made."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.url = path.as_uri()
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.requests: List[str] = []
        self.dialogs: List[str] = []
        # Every request is recorded, and any but the page itself refused: nothing leaves.
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("dialog", self._dialog)  # an alert() would mean a script ran
        self.page.goto(self.url)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _route(self, route: Any) -> None:
        self.requests.append(route.request.url)
        if route.request.url == self.url:
            route.continue_()
        else:
            route.abort()

    def attribute(self, selector: str, name: str) -> List[str]:
        return [
            str(v)
            for v in self.page.eval_on_selector_all(
                selector, f"e => e.map(x => x.getAttribute('{name}'))"
            )
        ]


@pytest.fixture
def visit(browser: Any) -> Iterator[Any]:
    opened: List[Visit] = []

    def open_page(path: Path) -> Visit:
        opened.append(Visit(browser, path))
        return opened[-1]

    yield open_page
    for page in opened:
        page.context.close()


def test_the_timeline_has_a_row_per_rank_and_a_bar_per_attempt(restarted: Path, visit: Any) -> None:
    page = visit(restarted)
    assert page.attribute("svg.timeline g.row.node", "data-node") == ["0", "1"]
    assert page.attribute("svg.timeline g.row.rank", "data-rank") == ["0", "1", "2", "3"]
    for rank in range(4):
        row = f'svg.timeline g.row.rank[data-rank="{rank}"] rect.bar'
        assert page.attribute(row, "data-attempt") == ["0", "1"]
    failed = page.page.locator('g.row.rank[data-rank="3"] rect.bar.failed')
    assert failed.count() == 1
    first = failed.bounding_box()
    second = page.page.locator('g.row.rank[data-rank="3"] rect.bar.ok').bounding_box()
    assert first["width"] > 0 and second["x"] >= first["x"] + first["width"] - 1  # in sequence
    # SVG elements have text content, not an HTML element's inner text.
    assert "rank 3 on node 1, attempt 0: exit 1" in failed.locator("title").text_content()
    marker = page.page.locator("svg.timeline g.marker text").text_content()
    assert marker == "attempt 1"


def test_the_failure_shows_its_exception(restarted: Path, visit: Any) -> None:
    page = visit(restarted)
    heading = page.page.locator("#failure-0 h3").inner_text()
    assert heading == "Attempt 0: rank 3 on node 1 exited with code 1"
    exception = page.page.locator("#failure-0 pre.exception").inner_text()
    assert exception.startswith("Traceback (most recent call last):")
    assert exception.rstrip().endswith("ValueError: rank 3 broke in attempt 0")
    tail = page.page.locator("#failure-0 pre.tail").inner_text()
    assert "rank 3 attempt 0 <script>alert(1)</script>" in tail  # shown as text, never run
    assert page.page.locator("script").count() == 0 and page.dialogs == []


def test_every_log_link_resolves_to_a_file_and_nothing_is_fetched(
    restarted: Path, visit: Any
) -> None:
    page = visit(restarted)
    raw = page.attribute("a.log", "href")
    assert raw and not [href for href in raw if href.startswith(("/", "file:", "http"))]
    resolved = page.page.eval_on_selector_all("a.log", "links => links.map(a => a.href)")
    files = [Path(unquote(urlparse(url).path)) for url in resolved]
    assert all(url.startswith("file:///") for url in resolved)
    assert [path for path in files if not path.is_file()] == []
    names = {path.name for path in files}
    assert {"worker-0.log", "worker-3.log", "node-0.log", "node-1.log"} <= names
    assert page.requests == [page.url]  # the page itself, nothing else


def test_a_failing_single_node_run(single: Path, visit: Any) -> None:
    page = visit(single)
    assert page.attribute("svg.timeline g.row.rank", "data-rank") == ["0", "1"]
    classes = page.attribute('g.row.rank[data-rank="1"] rect.bar', "class")
    assert classes == ["bar failed"]
    assert page.page.locator("h1 .status").inner_text() == "exit code 3"
    assert (
        page.page.locator("#failure-0 h3")
        .inner_text()
        .endswith("rank 1 on node 0 exited with code 3")
    )
    assert (
        "rank 1 <img src=x onerror=alert(2)>"
        in page.page.locator("#failure-0 pre.tail").inner_text()
    )
    assert page.page.locator("img").count() == 0 and page.dialogs == []
    assert page.requests == [page.url]


def test_a_screenshot(restarted: Path, visit: Any, tmp_path: Path) -> None:
    page = visit(restarted)
    shot = tmp_path / "report.png"
    page.page.screenshot(path=str(shot), full_page=True)
    data = shot.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000
