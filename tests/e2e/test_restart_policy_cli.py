"""--max-restarts with its policy (--restart-on, --min-uptime, --restart-backoff), one node,
through the installed command; the summary records every attempt and the decision taken."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

from malaunch.testing import run_cli, run_dir

# Rank 1 exits with the attempt's code once rank 0 has left its mark (else a loaded machine
# may start rank 0 only after rank 1's failure has stopped the attempt).
WORKER = (
    "import os, sys, time\n"
    "attempt = int(os.environ['MALAUNCH_RESTART_COUNT'])\n"
    "mark = os.path.join(sys.argv[1], 'attempt-%d-rank-%s')\n"
    "open(mark % (attempt, os.environ['RANK']), 'w')\n"
    "deadline = time.monotonic() + 60\n"
    "while not os.path.exists(mark % (attempt, 0)) and time.monotonic() < deadline:\n"
    "    time.sleep(0.01)\n"
    "codes = [int(c) for c in sys.argv[2].split(',')]\n"
    "sys.exit(codes[attempt] if os.environ['RANK'] == '1' and attempt < len(codes) else 0)\n"
)


def launch(tmp_path: Path, codes: str, *options: str) -> Dict[str, Any]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    args = [
        "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2",
        "--log-dir", str(tmp_path / "logs"), *options,
        "--", sys.executable, str(script), str(out), codes,
    ]  # fmt: skip
    result = run_cli(args, cwd=tmp_path)
    summary: Dict[str, Any] = json.loads(
        (run_dir(tmp_path / "logs") / "malaunch-summary.json").read_text()
    )
    assert result.code == summary["exit_code"], result.stderr
    summary["attempts_seen"] = sorted(p.name for p in out.iterdir())
    return summary


def decisions(summary: Dict[str, Any]) -> List[Any]:
    return [
        (a["attempt"], (a["failure"] or {}).get("code"), a["decision"]) for a in summary["attempts"]
    ]


def test_restarts_until_success_then_exits_0(tmp_path: Path) -> None:
    summary = launch(tmp_path, "3,3", "--max-restarts", "2", "--restart-backoff", "0")
    assert summary["exit_code"] == 0
    assert decisions(summary) == [
        (0, 3, "restart 1 of 2"),
        (1, 3, "restart 2 of 2"),
        (2, None, "every worker of the job succeeded"),
    ]


def test_a_code_outside_restart_on_fails_at_once(tmp_path: Path) -> None:
    options = ("--max-restarts", "5", "--restart-on", "3,137", "--restart-backoff", "0")
    summary = launch(tmp_path, "3,4", *options)
    assert summary["exit_code"] == 4
    assert decisions(summary) == [
        (0, 3, "restart 1 of 5"),
        (1, 4, "exit code 4 is not in --restart-on"),
    ]


def test_a_start_up_crash_is_not_restarted(tmp_path: Path) -> None:
    summary = launch(tmp_path, "3", "--max-restarts", "5", "--min-uptime", "60")
    assert summary["exit_code"] == 3
    ((attempt, code, decision),) = decisions(summary)
    assert (attempt, code) == (0, 3)
    assert decision.endswith("before --min-uptime 60s: a start-up crash")
    assert summary["attempts_seen"] == ["attempt-0-rank-0", "attempt-0-rank-1"]


def test_bad_policy_values_are_usage_errors_before_anything_starts(tmp_path: Path) -> None:
    for option, value, message in (
        ("--restart-backoff", "5:1", "--restart-backoff '5:1': expected BASE[:MAX] seconds"),
        ("--restart-on", "1,x", "--restart-on '1,x': expected any, or exit codes"),
    ):
        result = run_cli(["--framework", "torch_ddp", option, value, "--", "true"], cwd=tmp_path)
        assert result.code == 64
        assert result.stderr.startswith(f"malaunch: error: {message}"), result.stderr
