"""Every decision is said on the console when it is taken (issue 22.1): each attempt's start,
a restart and its back-off, no restart and why; the summary JSON keeps the details."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import List

from malaunch.testing import run_cli
from malaunch.testing.commands import run_dir

# Rank 1 exits with the code of its attempt (the last code for later ones, 0 past the list);
# rank 0 waits to be stopped, so that rank 1's failure always finds it running.
WORKER = (
    "import os, sys, time\n"
    "attempt = int(os.environ['MALAUNCH_RESTART_COUNT'])\n"
    "codes = [int(c) for c in sys.argv[1].split(',')]\n"
    "if os.environ['RANK'] == '1':\n"
    "    sys.exit(codes[attempt] if attempt < len(codes) else 0)\n"
    "time.sleep(60)\n"
)


def launcher_lines(tmp_path: Path, codes: str, *options: str, nproc: int = 2) -> List[str]:
    """The launcher's lines up to its summary, pids replaced by N and the run folder by RUN."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    args = ["--framework", "torch_ddp", "--nproc-per-node", str(nproc)]
    args += ["--log-dir", str(tmp_path / "logs"), "--grace-period", "30", *options]
    result = run_cli([*args, "--", sys.executable, str(script), codes], cwd=tmp_path)
    lines = result.stderr.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("malaunch: info: summary:"))
    run = str(run_dir(tmp_path / "logs"))
    return [re.sub(r"pid \d+", "pid N", line).replace(run, "RUN") for line in lines[: end + 1]]


def test_a_code_outside_restart_on_says_no_restart_and_why(tmp_path: Path) -> None:
    lines = launcher_lines(tmp_path, "3", "--max-restarts", "3", "--restart-on", "1,70-79")
    assert lines == [
        "malaunch: info: starting ranks 0-1 (2 processes)",
        "malaunch: error: rank 1 (pid N) exited with code 3; stopping 1 other process",
        "malaunch: warning: no restart: exit code 3 is not in --restart-on 1,70-79",
        "malaunch: info: summary: exit code 3, first failure: rank 1 (RUN/malaunch-summary.json)",
    ]


def test_a_failure_before_min_uptime_says_no_restart_and_why(tmp_path: Path) -> None:
    lines = launcher_lines(tmp_path, "3", "--max-restarts", "3", "--min-uptime", "600")
    assert re.fullmatch(
        r"malaunch: warning: no restart: failed after \d+\.\ds, before --min-uptime 600s",
        lines[2],
    ), lines


def test_each_restart_is_said_with_its_back_off_then_the_attempt_it_starts(
    tmp_path: Path,
) -> None:
    lines = launcher_lines(
        tmp_path, "3,4,5", "--max-restarts", "2", "--restart-backoff", "0", nproc=3
    )
    failed = "malaunch: error: rank 1 (pid N) exited with code {}; stopping 2 other processes"
    assert lines == [
        "malaunch: info: starting ranks 0-2 (3 processes)",
        failed.format(3),
        "malaunch: warning: restart 1 of 2 at once",
        "malaunch: info: attempt 1: starting ranks 0-2 (3 processes)",
        failed.format(4),
        "malaunch: warning: restart 2 of 2 at once",
        "malaunch: info: attempt 2: starting ranks 0-2 (3 processes)",
        failed.format(5),
        "malaunch: warning: no restart left: --max-restarts 2 used up",
        "malaunch: info: summary: exit code 5, first failure: rank 1, after 2 restarts "
        "(RUN/malaunch-summary.json)",
    ]


def test_a_back_off_is_said_in_seconds(tmp_path: Path) -> None:
    lines = launcher_lines(tmp_path, "3,4", "--max-restarts", "1", "--restart-backoff", "0.2")
    # half of the 0.2 s is fixed, the other half random
    assert re.fullmatch(r"malaunch: warning: restart 1 of 1 after a 0\.[12]s back-off", lines[2])
    assert lines[3] == "malaunch: info: attempt 1: starting ranks 0-1 (2 processes)"


def test_without_restarts_asked_for_nothing_more_is_said(tmp_path: Path) -> None:
    lines = launcher_lines(tmp_path, "3")
    assert lines == [
        "malaunch: info: starting ranks 0-1 (2 processes)",
        "malaunch: error: rank 1 (pid N) exited with code 3; stopping 1 other process",
        "malaunch: info: summary: exit code 3, first failure: rank 1 (RUN/malaunch-summary.json)",
    ]


def test_every_node_says_the_decision(tmp_path: Path) -> None:
    """On a cluster each node's console is read alone: each says what the job decided."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER.replace("'1'", "'3'"))
    args = ["simulate", "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano"]
    args += ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs")]
    args += ["--max-restarts", "1", "--restart-backoff", "0", "--grace-period", "30"]
    result = run_cli([*args, "--", sys.executable, str(script), "7,7"], cwd=tmp_path)
    assert result.code == 7, result.stderr
    node_0 = [line for line in result.stdout.splitlines() if line.startswith("[node 0] malaunch")]
    assert node_0[:6] == [
        "[node 0] malaunch: info: starting ranks 0-1 (2 processes)",
        "[node 0] malaunch: warning: node 1 rank 3 exited with code 7: stopping (2 local "
        "processes)",
        "[node 0] malaunch: warning: restart 1 of 1 at once",
        "[node 0] malaunch: info: attempt 1: starting ranks 0-1 (2 processes)",
        "[node 0] malaunch: warning: node 1 rank 3 exited with code 7: stopping (2 local "
        "processes)",
        "[node 0] malaunch: warning: no restart left: --max-restarts 1 used up",
    ]
    node_1 = [line for line in result.stdout.splitlines() if line.startswith("[node 1] malaunch")]
    assert [re.sub(r"pid \d+", "pid N", line) for line in node_1[:6]] == [
        "[node 1] malaunch: info: starting ranks 2-3 (2 processes)",
        "[node 1] malaunch: error: rank 3 (pid N) exited with code 7; stopping 1 other process",
        "[node 1] malaunch: warning: restart 1 of 1 at once",
        "[node 1] malaunch: info: attempt 1: starting ranks 2-3 (2 processes)",
        "[node 1] malaunch: error: rank 3 (pid N) exited with code 7; stopping 1 other process",
        "[node 1] malaunch: warning: no restart left: --max-restarts 1 used up",
    ]
