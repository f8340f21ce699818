"""Log files and the console copy: complete, in order, whole lines, chosen ranks only."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path
from typing import List

import pytest
from jobs import Job, kill_quietly

from malaunch.errors import UsageError
from malaunch.testing import wait_gone

LINES = 200_000
NOTE = re.compile(rb"malaunch: warning: (\d+) console lines? dropped: .*")


def expected_lines(rank: int, count: int) -> List[bytes]:
    return [b"rank%d line %d" % (rank, i) for i in range(count)]


def test_every_line_of_four_chatty_ranks_with_a_crash(job: Job) -> None:
    """4 x 200,000 lines through a real stdout; rank 3 dies of SIGKILL after a partial line.
    The logs hold every line; the console every line too, or (a reader behind the burst)
    whole lines in order and a count of those dropped."""
    done = [str(job.root / f"done{rank}") for rank in range(3)]
    specs = [job.spec(rank, "--lines", str(LINES), "--done-file", done[rank]) for rank in range(3)]
    crash = job.spec(
        3,
        "--lines",
        str(LINES),
        "--partial",
        "last words",
        "--wait-files",
        *done,
        "--kill-self",
        "SIGKILL",
    )
    driver = job.start_driver(job.plan(*specs, crash))
    try:
        stdout, _ = driver.communicate(timeout=60)
    finally:
        kill_quietly(driver)
    assert driver.returncode == 128 + signal.SIGKILL
    for rank, spec in enumerate([*specs, crash]):
        log = Path(spec.log_file).read_bytes().split(b"\n")
        tail = [b"last words"] if rank == 3 else [b""]
        assert log == [*expected_lines(rank, LINES), *tail], f"log of rank {rank}"
    # The console is a pipe this test reads as fast as it can; on a busy machine it may fall
    # behind the burst, and whole lines are then dropped and counted (the logs hold them).
    console = stdout.encode().split(b"\n")
    assert console[-1] == b""  # the console ends with a whole line
    notes = [NOTE.fullmatch(line) for line in console if line.startswith(b"malaunch: ")]
    dropped = sum(int(note[1]) for note in notes if note is not None)
    assert len(notes) == len([note for note in notes if note is not None])
    shown = 0
    for rank in range(4):
        prefix = b"[rank %d] " % rank
        mine = [line[len(prefix) :] for line in console if line.startswith(prefix)]
        tail = [b"last words"] if rank == 3 else []
        every = [*expected_lines(rank, LINES), *tail]
        assert mine == every if not dropped else is_subsequence(mine, every), f"rank {rank}"
        shown += len(mine)
    # Nothing else: a line split or merged across ranks would lack a prefix or break a count.
    assert len(console) - 1 == shown + len(notes)
    assert shown + dropped == 4 * LINES + 1


def is_subsequence(part: List[bytes], whole: List[bytes]) -> bool:
    items = iter(whole)
    return all(any(item == wanted for item in items) for wanted in part)


def test_partial_last_line_and_prefixes(job: Job) -> None:
    printed = [str(job.root / name) for name in ("ps-printed", "scheduler-printed")]
    ps = job.spec(
        1, "--lines", "1", "--done-file", printed[0], "--sleep", "60", role="ps", service=True
    )
    scheduler = job.spec(
        None,
        "--lines",
        "1",
        "--done-file",
        printed[1],
        "--sleep",
        "60",
        role="scheduler",
        service=True,
    )
    worker = job.spec(0, "--lines", "2", "--partial", "no newline", "--wait-files", *printed)
    # The services' lines were printed before they were stopped: they are not lost.
    assert job.run(job.plan(worker, ps, scheduler)) == 0
    lines = sorted(bytes(job.console).split(b"\n"))
    assert lines == sorted(
        [
            b"",
            b"[rank 0] rank0 line 0",
            b"[rank 0] rank0 line 1",
            b"[rank 0] no newline",
            b"[ps 1] ps1 line 0",
            b"[scheduler] scheduler line 0",
        ]
    )
    assert job.log(worker) == b"rank0 line 0\nrank0 line 1\nno newline"


@pytest.mark.parametrize(
    ("spec", "shown"), [("all", [0, 1, 2, 3]), ("none", []), ("0,2-3", [0, 2, 3]), ("3", [3])]
)
def test_console_ranks_choose_what_is_echoed(job: Job, spec: str, shown: List[int]) -> None:
    specs = [job.spec(rank, "--lines", "3") for rank in range(4)]
    assert job.run(job.plan(*specs), console_ranks=spec) == 0
    echoed = {int(line.split(b"]")[0][6:]) for line in bytes(job.console).splitlines()}
    assert sorted(echoed) == shown
    for rank, process in enumerate(specs):  # the log files are complete whatever is echoed
        assert job.log(process).splitlines() == expected_lines(rank, 3)


@pytest.mark.parametrize("bad", ["", "some", "1-", "3-1", "-2", "1,,2"])
def test_bad_console_ranks_is_a_usage_error_before_anything_starts(job: Job, bad: str) -> None:
    with pytest.raises(UsageError, match="--console-ranks"):
        job.run(job.plan(job.spec(0)), console_ranks=bad)
    assert job.pid_files() == 0
    assert not job.log_dir.exists()


def test_restart_appends_to_the_log(job: Job) -> None:
    spec = job.spec(0, "--lines", "1", "--fail-before", "1")
    assert job.run(job.plan(spec), max_restarts=1) == 0
    # Attempt 0 printed its line and failed; attempt 1 printed it again, after it.
    assert job.log(spec) == b"rank0 line 0\nrank0 line 0\n"


ESCAPE = (
    "import subprocess, sys\n"
    "print('worker line', flush=True)\n"
    "child = subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(60)'],"
    " start_new_session=True)\n"
    "open({pid_file!r}, 'w').write(str(child.pid))\n"
)


def test_output_held_by_an_escaped_process_does_not_hang_the_launcher(
    job: Job, messages: List[str]
) -> None:
    """Without containment (no subreaper, no cgroup), a grandchild that left the worker's
    session keeps the output pipe open: the launcher still ends (after a short drain) with the
    worker's output in the log."""
    pid_file = job.root / "escaped.pid"
    spec = job.spec(0, argv=[sys.executable, "-S", "-c", ESCAPE.format(pid_file=str(pid_file))])
    try:
        assert job.run(job.plan(spec), containment=False) == 0
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert job.log(spec) == b"worker line\n"
    assert any("still held open" in m for m in messages)


def test_an_escaped_process_is_killed_once_the_workers_are_done(
    job: Job, messages: List[str]
) -> None:
    """With containment (the default), the same grandchild is re-parented to the launcher (a
    child subreaper) or caught in the job's cgroup, and killed when the attempt ends."""
    pid_file = job.root / "escaped.pid"
    spec = job.spec(0, argv=[sys.executable, "-S", "-c", ESCAPE.format(pid_file=str(pid_file))])
    assert job.run(job.plan(spec)) == 0
    escaped = int(pid_file.read_text())
    assert wait_gone([escaped]) == []
    assert job.log(spec) == b"worker line\n"
    said = [m for m in messages if "that had left their process group (pids " in m]
    assert said and str(escaped) in said[0].split("(pids ")[1]
    assert not any("still held open" in m for m in messages)
