"""torchrun's worker contract in native torch_ddp mode through the installed command, with a
standard-library worker (tests/workers/elastic_worker.py): the attempt in
TORCHELASTIC_RESTART_COUNT, --max-restarts in TORCHELASTIC_MAX_RESTARTS, each rank's own error
file read into the summary and the console, and a stale error file never taken for a new one.
The real ``@record`` and real torchrun are in test_frameworks_contracts.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict

from launchers import node_dir

from malaunch.testing import run_cli, run_dir

WORKER = Path(__file__).resolve().parents[1] / "workers" / "elastic_worker.py"


def env_of(out: Path, rank: int, attempt: int) -> Dict[str, str]:
    data: Dict[str, str] = json.loads((out / f"env-{rank}-{attempt}.json").read_text())
    return data


def test_restart_count_error_file_and_summary(tmp_path: Path) -> None:
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    result = run_cli(
        [
            "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2",
            "--max-restarts", "1", "--restart-backoff", "0", "--log-dir", str(logs), "--",
            sys.executable, "-S", str(WORKER), str(out), "--fail-rank", "1",
            "--record-attempt", "0",
        ],
        timeout=120,
    )  # fmt: skip
    assert result.code == 11, result.stderr  # attempt 1's failure: 10 + 1
    run = run_dir(logs)
    for attempt in (0, 1):
        for rank in (0, 1):
            env = env_of(out, rank, attempt)
            assert env["TORCHELASTIC_RESTART_COUNT"] == str(attempt)
            assert env["TORCHELASTIC_MAX_RESTARTS"] == "1"
            assert env["TORCHELASTIC_ERROR_FILE"] == str(run / f"worker-{rank}.error.json")
    summary: Dict[str, Any] = json.loads((run / "malaunch-summary.json").read_text())
    first, second = (entry["failure"] for entry in summary["attempts"])
    error = first["error"]
    assert (error["type"], error["message"]) == ("RuntimeError", "shard 7 is corrupt")
    assert error["frame"] == 'File "elastic_worker.py", line 40, in main'
    assert error["code"] == 'raise RuntimeError("shard 7 is corrupt")'
    assert error["file"] == str(run / "worker-1.error.json")
    # Attempt 1 wrote no error file: attempt 0's was removed before it started.
    assert second["error"] is None
    assert summary["first_failure"]["error"] is None
    assert not (run / "worker-1.error.json").exists()


def test_the_console_summary_shows_the_structured_error(tmp_path: Path) -> None:
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    result = run_cli(
        [
            "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "2",
            "--log-dir", str(logs), "--", sys.executable, "-S", str(WORKER), str(out),
            "--fail-rank", "0", "--record-attempt", "0",
        ],
        timeout=120,
    )  # fmt: skip
    assert result.code == 10, result.stderr
    run = run_dir(logs)
    lines = result.stderr.splitlines()
    at = lines.index(
        f"malaunch: info: rank 0: its error file ({run / 'worker-0.error.json'}) says:"
    )
    assert lines[at + 1].startswith("malaunch: info:   | RuntimeError: shard 7 is corrupt (at ")
    assert lines[at + 2 : at + 4] == [
        'malaunch: info:   | File "elastic_worker.py", line 40, in main',
        'malaunch: info:   |     raise RuntimeError("shard 7 is corrupt")',
    ]
    summary = json.loads((run / "malaunch-summary.json").read_text())
    assert summary["first_failure"]["error"]["message"] == "shard 7 is corrupt"


BIG_TRACEBACK = """\
import os, sys, time
if os.environ["RANK"] != "1":
    time.sleep(60)
lines = ["Traceback (most recent call last):"]
lines += ['  File "/x/' + "\\u00e9" * 130 + str(i) + '.py", line 1, in f' for i in range(150)]
print("\\n".join(lines) + "\\nValueError: big", flush=True)
sys.exit(3)
"""


def test_a_failure_with_a_huge_non_ascii_traceback_still_reaches_every_node(
    tmp_path: Path,
) -> None:
    """Its report used to exceed the job channel's 64 KiB line (each character six bytes as
    ASCII JSON): node 1's launcher died with an internal error (70) and node 0 waited."""
    script = tmp_path / "big.py"
    script.write_text(BIG_TRACEBACK, encoding="utf-8")
    logs = tmp_path / "logs"
    result = run_cli(
        ["simulate", "--nodes", "2", "--platform", "volcano", "--framework", "torch_ddp",
         "--console-ranks", "none", "--log-dir", str(logs), "--", sys.executable, "-S",
         str(script)],
        timeout=120,
    )  # fmt: skip
    assert result.code == 3, result.stdout[-2000:] + result.stderr[-2000:]
    stopped = json.loads((node_dir(logs, 0) / "malaunch-summary.json").read_text())
    assert stopped["exit_code"] == 75
    told = stopped["stopped_by"]
    assert (told["node"], told["rank"], told["code"]) == (1, 1, 3)
    assert told["exception"].endswith("ValueError: big")
    assert told["tail"][-1] == "ValueError: big"
