"""``malaunch logs``' stdout goes through the console writer: never a blocking write.

A pipe's reader that stalls neither loses ``malaunch logs`` a line (the logs wait in their
files: it waits for the reader) nor keeps ``--follow`` from ending on SIGTERM, which used to
wait forever inside the write.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import pytest

from malaunch.testing import clean_env, malaunch_executable, run_cli, run_dir

CHATTY = "import os\nfor i in range(30000):\n    print('line %d ' % i + '.' * 90)\n"


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose logs hold about 3 MB: more than a pipe and the writer's buffer take."""
    tmp_path = tmp_path_factory.mktemp("big")
    args = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "1",
            "--console-ranks", "none", "--log-dir", str(tmp_path / "logs"),
            "--", sys.executable, "-c", CHATTY]  # fmt: skip
    assert run_cli(args, cwd=tmp_path).code == 0
    return run_dir(tmp_path / "logs")  # the run folder itself: nothing said about which run


def start_unread(args: List[str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([malaunch_executable(), *args], cwd=cwd, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def test_a_stalled_reader_gets_every_line_once_it_reads(big_run: Path, tmp_path: Path) -> None:
    with start_unread(["logs", str(big_run)], tmp_path) as proc:
        time.sleep(3)  # the reader stalls; the lines wait for it, none is dropped
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.decode().splitlines() == [
        f"[node 0 rank 0] line {i} " + "." * 90 for i in range(30000)
    ]


def test_follow_ends_on_sigterm_while_its_reader_is_stalled(big_run: Path, tmp_path: Path) -> None:
    with start_unread(["logs", "--follow", str(big_run)], tmp_path) as proc:
        try:
            time.sleep(3)  # stdout is full: a blocking write would hold the command forever
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.stdout is not None and proc.stderr is not None
        os.set_blocking(proc.stdout.fileno(), False)
        *shown, last = (proc.stdout.read() or b"").decode().splitlines()
        assert (code, proc.stderr.read()) == (0, b"")
    expected = [f"[node 0 rank 0] line {i} " + "." * 90 for i in range(len(shown) + 1)]
    assert shown == expected[:-1]
    assert expected[-1].startswith(last)  # given up at the stop: the pipe took part of it
