"""Hostile run files (issue 13): ``malaunch logs`` and ``report`` on a damaged log dir.

A log dir is read after the fact, maybe copied from a cluster, edited or truncated: a
``malaunch-run.json`` or ``malaunch-summary.json`` nested too deeply for the JSON parser, or
holding an integer past Python's conversion limit, is passed over exactly as one that is not
JSON at all (never exit 70). Runs the installed ``malaunch`` on a copy of one real run.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Dict

import pytest

from malaunch.testing import run_cli, run_dir

TIMEOUT = 30.0
DAMAGED: Dict[str, str] = {
    "not-json": "{this is not JSON",
    "deep": "[" * 100_000 + "]" * 100_000,
    "long-int": '{"node": ' + "9" * 5000 + "}",
}
WHY = {
    "not-json": "not JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
    "(char 1))",
    "deep": "not JSON (nested too deeply to read)",
    "long-int": "not JSON (node: an integer of 5000 digits (at most 4300))",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder of a real single-node run of one rank that prints one line."""
    log_dir = tmp_path_factory.mktemp("run") / "malaunch-logs"
    args = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "1"]
    script = "print('hello from rank 0')"
    result = run_cli([*args, "--log-dir", str(log_dir), "--", sys.executable, "-c", script])
    assert result.code == 0, result.stderr
    return run_dir(log_dir)


def _copy(run: Path, to: Path, damage: str = "", file: str = "") -> Path:
    shutil.copytree(run, to)
    if damage:
        (to / file).write_text(DAMAGED[damage])
    return to


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_logs_passes_over_a_node_whose_manifest_is_damaged(
    run: Path, tmp_path: Path, damage: str
) -> None:
    _copy(run, tmp_path / "runs" / "good")
    _copy(run, tmp_path / "runs" / "bad", damage, "malaunch-run.json")
    result = run_cli(["logs", str(tmp_path / "runs")], timeout=TIMEOUT)
    assert (result.code, result.stderr) == (0, ""), result.stderr[:2000]
    assert result.stdout == "[node 0 rank 0] hello from rank 0\n"


@pytest.mark.parametrize("damage", sorted(DAMAGED))
@pytest.mark.parametrize("file", ["malaunch-run.json", "malaunch-summary.json"])
def test_report_warns_once_and_shows_what_the_other_file_holds(
    run: Path, tmp_path: Path, damage: str, file: str
) -> None:
    log_dir = _copy(run, tmp_path / "logs", damage, file)
    out = tmp_path / "report.html"
    result = run_cli(["report", str(log_dir), "--html", str(out)], timeout=TIMEOUT)
    assert result.code == 0, result.stderr[:2000]
    assert result.stderr == f"malaunch: warning: ignoring {log_dir / file}: {WHY[damage]}\n"
    assert result.stdout.startswith(f"wrote {out} (logs: 1 node, ")  # the folder read
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("damage", ["deep", "long-int"])
def test_report_with_both_files_damaged_is_66_in_one_error_line(
    run: Path, tmp_path: Path, damage: str
) -> None:
    log_dir = _copy(run, tmp_path / "logs", damage, "malaunch-run.json")
    (log_dir / "malaunch-summary.json").write_text(DAMAGED[damage])
    result = run_cli(["report", str(log_dir), "--html", str(tmp_path / "r.html")])
    assert (result.code, result.stdout) == (66, "")
    assert result.stderr.splitlines()[-1] == (
        f"malaunch: error: {log_dir}: no readable malaunch-run.json or malaunch-summary.json "
        "there or in a node-<k>/ below it; not the log dir of a malaunch run"
    )
    assert "Traceback" not in result.stderr
