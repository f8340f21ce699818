"""`malaunch report` through the installed command: what it writes, where it reads by
default, and its one-line errors. The page in a real browser: test_report_browser.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from malaunch.testing import clean_env, run_cli

FAILING = (
    "import os, sys; print('hello', flush=True); sys.exit(3 if os.environ['RANK'] == '1' else 0)"
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real failed single-node run: rank 1 exits 3."""
    log_dir = tmp_path_factory.mktemp("run") / "malaunch-logs"
    args = ["--framework", "torch_ddp", "--nproc-per-node", "2", "--log-dir", str(log_dir)]
    result = run_cli([*args, "--", sys.executable, "-c", FAILING])
    assert result.code == 3, result.stderr
    return log_dir


def test_writes_the_page_and_says_what_it_holds(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "new" / "report.html"
    result = run_cli(["report", str(run_dir), "--html", str(out)])
    (run,) = run_dir.glob("run-*")
    reading = f"malaunch: info: reading the latest run in {run_dir}: {run.name}\n"
    assert (result.code, result.stderr) == (0, reading)
    assert result.stdout == f"wrote {out} ({run.name}: 1 node, 2 processes, 1 failure)\n"
    assert run_cli(["report", str(run), "--html", str(out)]).stderr == ""  # a run folder given
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "rank 1 on node 0 exited with code 3" in page


def test_reads_ma_log_dir_then_malaunch_logs_by_default(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    from_env = run_cli(["report", "--html", str(out)], env=clean_env({"MA_LOG_DIR": str(run_dir)}))
    assert from_env.code == 0, from_env.stderr
    here = run_cli(["report", "--html", str(out)], cwd=run_dir.parent)
    assert here.code == 0, here.stderr


def test_a_missing_directory_is_66_in_one_line(tmp_path: Path) -> None:
    result = run_cli(["report", str(tmp_path / "nowhere"), "--html", str(tmp_path / "r.html")])
    assert result.code == 66
    assert result.stderr == (
        f"malaunch: error: {tmp_path / 'nowhere'}: no such directory (expected the log dir "
        "of a malaunch run, e.g. --log-dir's)\n"
    )
    assert not (tmp_path / "r.html").exists()


def test_a_directory_without_a_run_is_66_in_one_line(tmp_path: Path) -> None:
    result = run_cli(["report", str(tmp_path), "--html", str(tmp_path / "r.html")])
    assert result.code == 66
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"malaunch: error: {tmp_path}: no readable malaunch-run.json")


def test_an_unwritable_out_is_74_in_one_line(run_dir: Path, tmp_path: Path) -> None:
    # An OUT that exists and is no regular file (a directory, FIFO, device) is refused before
    # anything is written, with 64: tests/e2e/test_hostile_files.py.
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "sub" / "r.html"
    (run,) = run_dir.glob("run-*")
    result = run_cli(["report", str(run), "--html", str(out)])
    assert result.code == 74
    reason = f"{tmp_path / 'file'} is a file, not a directory"
    assert result.stderr == f"malaunch: error: cannot write the report {out}: {reason}\n"


def test_without_dir_the_launchers_default_dir(run_dir: Path, tmp_path: Path) -> None:
    # The same default as `malaunch logs`: --log-dir's variable first, then MA_LOG_DIR.
    out = tmp_path / "r.html"
    env = clean_env({"MALAUNCH_LOG_DIR": str(run_dir), "MA_LOG_DIR": str(tmp_path / "no")})
    result = run_cli(["report", "--html", str(out)], env=env, cwd=tmp_path)
    (run,) = run_dir.glob("run-*")
    reading = f"malaunch: info: reading the latest run in {run_dir}: {run.name}\n"
    assert (result.code, result.stderr) == (0, reading)
    assert result.stdout == f"wrote {out} ({run.name}: 1 node, 2 processes, 1 failure)\n"


def test_html_is_required(run_dir: Path) -> None:
    result = run_cli(["report", str(run_dir)])
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: --html OUT is required: the file to write the page to\n"
    )


def test_listed_in_the_launch_help() -> None:
    result = run_cli(["--help"])
    assert "malaunch report [DIR] --html OUT" in result.stdout
