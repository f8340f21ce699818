"""Running the installed ``malaunch`` and checking what it left behind (part of
``malaunch.testing``): exit code and output, live pids, the run folder and its summary."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from malaunch.supervisor.runs import SUMMARY, runs_in
from malaunch.testing.environment import clean_env


def malaunch_executable() -> str:
    """The installed ``malaunch`` next to the running interpreter (a virtualenv's bin)."""
    beside = Path(sys.executable).with_name("malaunch")
    if beside.exists():
        return str(beside)
    found = shutil.which("malaunch")
    if found is None:
        msg = "the malaunch command is not installed"
        raise RuntimeError(msg)
    return found


@dataclasses.dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(
    args: Sequence[str],
    env: Optional[Mapping[str, str]] = None,
    cwd: Optional[Path] = None,
    timeout: float = 60.0,
) -> CliResult:
    """Run the installed ``malaunch`` with ``args`` in ``env`` (default: :func:`clean_env`)."""
    proc = subprocess.run(
        [malaunch_executable(), *args],
        env=dict(env) if env is not None else clean_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process; a zombie (dead, not yet reaped) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rsplit(")", 1)[1].split()[0]  # the name in parentheses may hold spaces
    return state not in ("Z", "X")


def wait_gone(pids: Sequence[int], timeout: float = 5.0) -> List[int]:
    """Wait until every pid has exited; return those still alive at the deadline.

    Orphans are reaped by init asynchronously, hence a bounded wait rather than one look.
    """
    deadline = time.monotonic() + timeout
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if pid_alive(pid)]


def run_dir(log_dir: Path) -> Path:
    """The run folder the last launch with ``--log-dir log_dir`` wrote: the newest one there
    (the one ``latest`` names, or a newer one of a launch that ended before starting, which
    holds only its summary); ``log_dir`` itself when it keeps no run folders (a run folder, a
    simulated node's ``node-<k>/``)."""
    runs = runs_in(log_dir)
    return runs[-1] if runs else log_dir


def read_summary(log_dir: Path) -> Dict[str, Any]:
    """The ``malaunch-summary.json`` of the latest run in ``log_dir`` (see :func:`run_dir`)."""
    loaded: Dict[str, Any] = json.loads((run_dir(log_dir) / SUMMARY).read_text())
    return loaded
