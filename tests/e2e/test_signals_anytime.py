"""A stopping signal at any moment of a launch: one line, exit 128+N, nothing left behind.

Before the supervisor reads signals as events, a launch imports its modules, loads plugins,
waits for a rank table and plans; a SIGINT there printed a ``KeyboardInterrupt`` traceback and
a SIGTERM killed the launcher without a word (its ``finally`` blocks never ran). And a signal
whose default action ends a process (Slurm's SIGUSR1 before a time limit) killed the launcher
mid-job unless it was forwarded, without a summary. The moments are generated.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from malaunch.testing import clean_env, malaunch_executable, run_dir

STOPPING = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2]


def _stopped_at(tmp_path: Path, signum: int, delay: float) -> subprocess.CompletedProcess[str]:
    """A launch waiting for a rank table that never completes, sent ``signum`` after
    ``delay`` seconds (anywhere from the interpreter's start to the wait)."""
    table = tmp_path / "rank_table.json"
    table.write_text(json.dumps({"status": "initializing"}))
    env = clean_env({"RANK_TABLE_FILE": str(table)})
    args = ["--framework", "mindspore", "--log-dir", str(tmp_path / "logs"), "--"]
    proc = subprocess.Popen(
        [malaunch_executable(), *args, sys.executable, "-c", "pass"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(delay)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
# From 0.15 s: before then the interpreter may not have run the console script's first line
# (no program can handle a signal before it runs); after 0.8 s it waits for the rank table.
@given(signum=st.sampled_from(STOPPING), delay=st.floats(0.15, 0.8))
def test_a_signal_before_the_start_is_one_line_and_128_plus_n(
    tmp_path: Path, signum: int, delay: float
) -> None:
    result = _stopped_at(tmp_path, signum, delay)
    name = signal.Signals(signum).name
    assert result.returncode == 128 + signum, (name, delay, result.stderr)
    assert "Traceback" not in result.stderr
    assert "KeyboardInterrupt" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if name in line]
    assert lines == [f"malaunch: warning: received {name}: stopping"], result.stderr
    assert not any((tmp_path / "logs").glob("run-*")), "a run folder of a launch never started"


def test_an_unforwarded_signal_stops_the_job_as_sigterm_does(tmp_path: Path) -> None:
    code = "import time; print('up', flush=True); time.sleep(60)"
    args = ["--framework", "torch_ddp", "--nproc-per-node", "2", "--log-dir", "logs", "--"]
    proc = subprocess.Popen(
        [malaunch_executable(), *args, sys.executable, "-c", code],
        env=clean_env(),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # a rank is up: the supervisor reads signals now
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGUSR1, err
    assert "received SIGUSR1 (not in --forward-signals): stopping 2 processes with SIGTERM" in err
    summary = json.loads((run_dir(tmp_path / "logs") / "malaunch-summary.json").read_text())
    assert summary["exit_code"] == 128 + signal.SIGUSR1
    pids = [row["pid"] for row in summary["processes"]]
    assert pids
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text()
