"""`malaunch logs` through the installed command, on the logs of real runs: a local job, a
simulated two-node job, a job followed while it restarts, and the errors."""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple

import pytest

from malaunch.testing import clean_env, malaunch_executable, run_cli, run_dir, wait_gone

READING = "malaunch: info: reading the latest run in "
RUN = r"run-\d{8}-\d{6}-\d{3}[0-9a-f]{3}"
# Rank r prints "step k" for every k = r (mod world), in turn: it first waits until step k - 1
# is in its rank's log file (so the launcher has read and stamped it), writes the time to
# MARKS/k, and waits a little more, so that the arrival times follow k whatever the machine's
# load. (Turns at fixed times broke when a loaded machine started a rank late.)
TURNS = """\
import glob, os, sys, time
logs, marks, world, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), 12
rank = int(os.environ["RANK"])

def logged(k):
    for path in glob.glob(os.path.join(logs, "run-*", "worker-%d.log" % (k % world))):
        with open(path, errors="replace") as log:
            if "step %d from" % k in log.read():
                return True
    return False

for k in range(rank, steps, world):
    deadline = time.time() + 60
    while k and not logged(k - 1):
        if time.time() > deadline:
            sys.exit("step %d was never logged" % (k - 1))
        time.sleep(0.01)
    with open(os.path.join(marks, str(k)), "w") as mark:
        mark.write(repr(time.time()))
    time.sleep(0.02)
    print("step %d from %d" % (k, rank), flush=True)
"""

HELLO = """\
import os
rank = os.environ["RANK"]
for i in range(3):
    print("rank %s says %d" % (rank, i), flush=True)
"""

# Attempt 0: every rank prints two lines, rank 1 then fails; attempt 1: two more lines each.
RESTARTING = """\
import os, sys, time
attempt, rank = int(os.environ["MALAUNCH_RESTART_COUNT"]), os.environ["RANK"]
for i in range(2):
    print("attempt %d rank %s line %d" % (attempt, rank, i), flush=True)
    time.sleep(0.2)
sys.exit(3 if attempt == 0 and rank == "1" else 0)
"""


def launch_args(log_dir: Path, nproc: int, *extra: str) -> List[str]:
    return [
        "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", str(nproc),
        "--log-dir", str(log_dir), *extra, "--",
    ]  # fmt: skip


def run_job(tmp_path: Path, name: str, script: str, *args: str, nproc: int = 3) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(script, encoding="utf-8")
    log_dir = tmp_path / name
    result = run_cli([*launch_args(log_dir, nproc), sys.executable, str(path), *args])
    assert result.code == 0, result.stderr
    return log_dir


def printed(*args: str, cwd: Optional[Path] = None, **env: str) -> List[str]:
    """What ``malaunch logs ARGS`` prints; on stderr at most the line naming the run read."""
    result = run_cli(["logs", *args], env=clean_env(env), cwd=cwd)
    assert result.code == 0, result.stderr
    assert re.fullmatch(rf"({READING}.*: {RUN}\n)?", result.stderr), result.stderr
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def turns(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    """A job's log dir, and the folder of the moments its ranks took their turns (MARKS)."""
    tmp_path = tmp_path_factory.mktemp("turns")
    marks = tmp_path / "marks"
    marks.mkdir()
    logs = tmp_path / "turns"
    return run_job(tmp_path, "turns", TURNS, str(logs), str(marks), "3"), marks


@pytest.fixture
def turns_dir(turns: Tuple[Path, Path]) -> Path:
    return turns[0]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("simulated")
    script = tmp_path / "hello.py"
    script.write_text(HELLO, encoding="utf-8")
    log_dir = tmp_path / "sim"
    args = [
        "simulate", "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano",
        "--framework", "torch_ddp", "--log-dir", str(log_dir), "--", sys.executable, str(script),
    ]  # fmt: skip
    result = run_cli(args)
    assert result.code == 0, result.stderr
    run = run_dir(log_dir)
    assert (run / "node-0.log").exists() and (run / "node-1" / "worker-3.log").exists()
    return log_dir


def test_a_jobs_lines_come_once_prefixed_in_the_order_they_arrived(turns_dir: Path) -> None:
    assert printed(str(turns_dir)) == [
        f"[node 0 rank {k % 3}] step {k} from {k % 3}" for k in range(12)
    ]


def test_without_dir_the_launchers_default_dir(turns_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(turns_dir, tmp_path / "malaunch-logs")  # a copy reads its own files
    expected = printed(str(turns_dir))
    assert printed(cwd=tmp_path) == expected
    assert printed(cwd=tmp_path.parent, MA_LOG_DIR=str(tmp_path / "malaunch-logs")) == expected
    assert printed(cwd=tmp_path.parent, MALAUNCH_LOG_DIR=str(turns_dir), MA_LOG_DIR="x") == expected


def test_a_simulation_is_read_whole_and_by_node_and_rank(simulated: Path) -> None:
    every = printed(str(simulated))
    assert sorted(every) == sorted(
        f"[node {rank // 2} rank {rank}] rank {rank} says {i}"
        for rank in range(4)
        for i in range(3)
    )  # each once: the node launchers' console copies (node-<k>.log) are not read
    for rank in range(4):  # each rank's lines in their own order
        mine = [line for line in every if line.startswith(f"[node {rank // 2} rank {rank}]")]
        assert [line[-1] for line in mine] == ["0", "1", "2"]
    assert printed(str(simulated), "--nodes", "1") == [
        line for line in every if line.startswith("[node 1 ")
    ]
    assert printed(str(simulated), "--ranks", "0,3") == [
        line for line in every if "rank 0]" in line or "rank 3]" in line
    ]
    run = run_dir(simulated)
    nodes = [str(run / "node-1"), str(run / "node-0")]  # node dirs given one by one
    assert printed(*nodes) == every


def test_grep(turns_dir: Path, simulated: Path) -> None:
    assert printed(str(turns_dir), "--grep", r"step 1\d? ") == [
        "[node 0 rank 1] step 1 from 1", "[node 0 rank 1] step 10 from 1",
        "[node 0 rank 2] step 11 from 2",
    ]  # fmt: skip
    middle_ranks = [
        line for line in printed(str(simulated)) if "rank 1]" in line or "rank 2]" in line
    ]
    assert printed(str(simulated), "--grep", "says 2$", "--ranks", "1-2") == [
        line for line in middle_ranks if line.endswith("says 2")
    ]
    assert printed(str(turns_dir), "--grep", "nothing like this") == []


def test_since(turns: Tuple[Path, Path]) -> None:
    turns_dir, marks = turns
    every = printed(str(turns_dir))
    assert printed(str(turns_dir), "--since", "1h") == every
    assert printed(str(turns_dir), "--since", "1d", "--ranks", "2") == every[2::3]
    future = datetime.datetime.now() + datetime.timedelta(minutes=5)
    assert printed(str(turns_dir), "--since", future.isoformat(timespec="seconds")) == []
    # Before step 6 was printed (20 ms before), after step 5 was logged.
    middle = datetime.datetime.fromtimestamp(float((marks / "6").read_text())).isoformat()
    assert printed(str(turns_dir), "--since", middle) == every[6:]


# -- following ------------------------------------------------------------------------------


@contextlib.contextmanager
def started(args: List[str], out: Path, cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The installed command in the background; killed (by pid) if the test leaves it."""
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            [malaunch_executable(), *args], stdout=sink, stderr=subprocess.PIPE, cwd=cwd,
            env=clean_env(),
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def lines_of(path: Path) -> List[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_follow_a_job_that_appears_and_restarts_then_sigterm(tmp_path: Path) -> None:
    """Followed from before it starts: its node dir, its files and its second attempt all
    appear later; every line is printed once; SIGTERM ends the follower with exit 0."""
    shared = tmp_path / "shared"
    shared.mkdir()
    run_job(shared, "earlier", HELLO, nproc=1)  # a finished run, so there is a log dir
    script = tmp_path / "restarting.py"
    script.write_text(RESTARTING, encoding="utf-8")
    out = tmp_path / "followed.txt"
    job_args = launch_args(shared / "job", 2, "--max-restarts", "1", "--restart-backoff", "0")
    with started(["logs", "--follow", str(shared)], out, tmp_path) as follower:
        wait_for(lambda: len(lines_of(out)) == 3)  # the earlier run's lines
        with started(
            [*job_args, sys.executable, str(script)], tmp_path / "job.txt", tmp_path
        ) as job:
            assert job.wait(timeout=60) == 0
        expected = [
            f"[node 0 rank {rank}] attempt {attempt} rank {rank} line {i}"
            for attempt in (0, 1) for rank in (0, 1) for i in (0, 1)
        ]  # fmt: skip
        wait_for(lambda: len(lines_of(out)) >= 3 + len(expected))
        time.sleep(0.5)  # anything printed twice would be by now
        follower.send_signal(signal.SIGTERM)
        assert follower.wait(timeout=10) == 0
        assert follower.stderr is not None and follower.stderr.read() == b""
    followed = lines_of(out)
    assert followed[:3] == [f"[node 0 rank 0] rank 0 says {i}" for i in range(3)]
    assert sorted(followed[3:]) == sorted(expected)
    for rank in (0, 1):  # each rank's lines in order, attempt 0 before attempt 1
        assert [line for line in followed if line.startswith(f"[node 0 rank {rank}] attempt")] == [
            line for line in expected if line.startswith(f"[node 0 rank {rank}]")
        ]


def test_follow_a_simulation_from_its_start_and_ctrl_c(tmp_path: Path) -> None:
    """Node directories appear after the simulation's own manifest; SIGINT ends with exit 0."""
    script = tmp_path / "slow.py"
    script.write_text(
        "import time\n" + HELLO.replace("flush=True)", "flush=True); time.sleep(0.3)")
    )
    log_dir = tmp_path / "sim"
    args = [
        "simulate", "--nodes", "2", "--nproc-per-node", "2", "--platform", "volcano",
        "--framework", "torch_ddp", "--log-dir", str(log_dir), "--", sys.executable, str(script),
    ]  # fmt: skip
    out = tmp_path / "followed.txt"
    with started(args, tmp_path / "sim.txt", tmp_path) as simulation:
        wait_for((log_dir / "latest").exists)  # once the node launchers have started
        with started(["logs", "-f", str(log_dir)], out, tmp_path) as follower:
            assert simulation.wait(timeout=60) == 0
            wait_for(lambda: len(lines_of(out)) >= 12)
            time.sleep(0.5)
            follower.send_signal(signal.SIGINT)
            assert follower.wait(timeout=10) == 0
    assert sorted(lines_of(out)) == sorted(printed(str(log_dir)))
    assert wait_gone([follower.pid, simulation.pid]) == []


def test_follow_started_before_the_log_dir_exists_waits_for_the_run(tmp_path: Path) -> None:
    """`logs -f` started first (the usual order in a second terminal) waits, saying so once,
    then prints the run's lines (a plain `logs` there is still 66: see below)."""
    log_dir = tmp_path / "later"
    out = tmp_path / "followed.txt"
    with started(["logs", "-f", str(log_dir)], out, tmp_path) as follower:
        time.sleep(1.5)  # the follower has looked and found nothing
        run_job(tmp_path, "later", HELLO, nproc=1)  # writes its logs in tmp_path/later
        wait_for(lambda: len(lines_of(out)) == 3)
        time.sleep(0.5)
        follower.send_signal(signal.SIGTERM)
        assert follower.wait(timeout=10) == 0
        assert follower.stderr is not None
        assert follower.stderr.read().decode() == (
            f"malaunch: info: waiting for a run in {log_dir}: nothing there yet\n"
            f"{READING}{log_dir}: {run_dir(log_dir).name}\n"
        )
    assert lines_of(out) == [f"[node 0 rank 0] rank 0 says {i}" for i in range(3)]


def test_follow_refuses_a_file_for_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = run_cli(["logs", "-f", str(tmp_path / "file")])
    assert (result.code, result.stderr) == (
        66,
        f"malaunch: error: {tmp_path}/file: not a directory\n",
    )


# -- errors and stdout ----------------------------------------------------------------------


def test_a_dir_without_a_manifest_is_66_naming_it(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for missing in (tmp_path / "empty", tmp_path / "absent"):
        result = run_cli(["logs", str(missing)])
        assert result.code == 66 and result.stdout == ""
        assert result.stderr.startswith(f"malaunch: error: {missing}: ")
        assert result.stderr.count("\n") == 1
    result = run_cli(["logs"], cwd=tmp_path)  # no ./malaunch-logs
    assert result.code == 66 and "malaunch-logs: no such log directory" in result.stderr


@pytest.mark.parametrize(
    ("option", "value"),
    [("--ranks", "x"), ("--nodes", "1-"), ("--grep", "(unclosed"), ("--since", "yesterday"),
     ("--since", "5 minutes")],
)  # fmt: skip
def test_a_bad_filter_is_64_naming_the_option(option: str, value: str, tmp_path: Path) -> None:
    result = run_cli(["logs", str(tmp_path / "not even there"), option, value])
    assert result.code == 64
    assert result.stderr.startswith(f"malaunch: error: {option} ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_a_closed_stdout_ends_quietly(tmp_path: Path) -> None:
    many = "for i in range(100000): print('line', i)\n"
    log_dir = run_job(tmp_path, "many", many, nproc=1)
    proc = subprocess.Popen(
        [malaunch_executable(), "logs", str(run_dir(log_dir))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == b"[node 0 rank 0] line 0\n"
        proc.stdout.close()  # what `| head -1` does
        assert proc.wait(timeout=30) in (0, 141)
        assert proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
