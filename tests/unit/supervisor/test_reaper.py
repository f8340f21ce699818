"""The reaper kills the groups it watches when the launcher's pipe closes without "done"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import pytest
from jobs import alive, wait_until

from malaunch.supervisor.reaper import Reaper


@pytest.fixture
def group(tmp_path: Path) -> Iterator[List[int]]:
    """A process group like a worker's: a leader in its own session plus one child."""
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    leader = subprocess.Popen([sys.executable, "-S", "-c", code], start_new_session=True)
    wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", "the group to start")
    pids = [leader.pid, int(pid_file.read_text())]
    yield pids
    for pid in pids:  # clean-up when a test left them running on purpose (or failed)
        if alive(pid):
            subprocess.run(["kill", "-9", str(pid)], check=False)
    leader.wait(timeout=10)


def test_launcher_death_kills_the_whole_group(group: List[int]) -> None:
    reaper = Reaper.start()
    reaper.watch(group[0])
    assert reaper.pipe is not None and reaper.proc is not None
    reaper.pipe.close()  # what the kernel does when the launcher dies
    reaper.proc.wait(timeout=10)
    wait_until(lambda: not any(alive(pid) for pid in group), "the group to be killed", 3.0)


def test_done_leaves_without_killing(group: List[int]) -> None:
    reaper = Reaper.start()
    reaper.watch(group[0])
    reaper.close()
    assert reaper.proc is not None and reaper.proc.returncode == 0
    assert all(alive(pid) for pid in group)


def test_forgotten_group_is_not_killed(group: List[int]) -> None:
    reaper = Reaper.start()
    reaper.watch(group[0])
    reaper.forget(group[0])
    assert reaper.pipe is not None and reaper.proc is not None
    reaper.pipe.close()
    reaper.proc.wait(timeout=10)
    assert all(alive(pid) for pid in group)


def test_without_an_interpreter_there_is_no_reaper(tmp_path: Path) -> None:
    reaper = Reaper.start(python=str(tmp_path / "no-python"))
    reaper.watch(1)  # ignored: no process to tell
    reaper.close()
    assert reaper.pid is None
