"""``malaunch logs`` through the installed command: ``--grep`` in linear time on a real run's
logs, one line for a pattern RE2 cannot run, and SIGINT or SIGTERM ending the command
whatever it is doing, a write to a reader that stopped reading included."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from malaunch.testing import clean_env, malaunch_executable, run_cli

LONG = "for i in range(3): print('a' * 50_000 + '!', flush=True)\nprint('aaab', flush=True)\n"
MANY = "for i in range(200_000): print('line', i)\n"
FULL = 32 << 10  # bytes in a pipe (of 64 KiB) that no reader empties...
STALLED_POLLS = 5  # ...unchanged over this many looks 0.05 s apart: the writer waits for room
# `malaunch logs DIR` names the run it reads, on stderr.
LATEST = "malaunch: info: reading the latest run in "


def quiet(stderr: str) -> str:
    """stderr without the line naming the run read."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith(LATEST))


def run_job(tmp_path: Path, name: str, script: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(script, encoding="utf-8")
    log_dir = tmp_path / name
    args = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "1",
            "--console-ranks", "none", "--log-dir", str(log_dir),
            "--", sys.executable, str(path)]  # fmt: skip
    result = run_cli(args)
    assert result.code == 0, result.stderr
    return log_dir


@pytest.fixture(scope="module")
def long_lines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_job(tmp_path_factory.mktemp("long"), "long", LONG)


@pytest.fixture(scope="module")
def many_lines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_job(tmp_path_factory.mktemp("many"), "many", MANY)


@pytest.mark.parametrize(
    ("pattern", "found"),
    [("(a+)+$", 0), ("(a|aa)+$", 0), ("^(a|a?)+$", 0), ("(a*)*b", 1), ("(a+)+!$", 3)],
)
def test_catastrophic_patterns_finish_on_long_lines(
    long_lines: Path, pattern: str, found: int
) -> None:
    """Python's re takes exponential time in the line's length on these: 16 s for 27
    characters, and lines here have 50,001 (the test's timeout bounds it, no timing)."""
    result = run_cli(["logs", str(long_lines), "--grep", pattern])
    assert (result.code, quiet(result.stderr)) == (0, ""), result.stderr
    assert len(result.stdout.splitlines()) == found


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(\w)\1", r"invalid escape sequence: \1"),
        ("(?<=loss )[0-9]+", "invalid perl operator: (?<="),
        ("err(?!or)", "invalid perl operator: (?!"),
    ],
)
def test_a_pattern_re2_cannot_run_is_64_in_one_line(
    long_lines: Path, pattern: str, reason: str
) -> None:
    result = run_cli(["logs", str(long_lines), "--grep", pattern])
    assert (result.code, result.stdout) == (64, "")
    assert result.stderr == (
        f"malaunch: error: --grep {pattern!r}: RE2 does not support this pattern ({reason}); "
        "--grep runs RE2, in time linear in the line, which has no backreferences or "
        "lookaround\n"
    )


def test_the_variable_twin_is_named_too(long_lines: Path) -> None:
    result = run_cli(["logs", str(long_lines)], env=clean_env({"MALAUNCH_LOGS_GREP": "(?=a)"}))
    assert (result.code, result.stdout) == (64, "")
    assert result.stderr == (
        "malaunch: error: MALAUNCH_LOGS_GREP '(?=a)': RE2 does not support this pattern (invalid "
        "perl operator: (?=); --grep runs RE2, in time linear in the line, which has no "
        "backreferences or lookaround\n"
    )


@contextlib.contextmanager
def stalled(args: List[str]) -> Iterator[subprocess.Popen[bytes]]:
    """The command writing into a pipe nobody reads; killed by pid if a test leaves it."""
    proc = subprocess.Popen(
        [malaunch_executable(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=clean_env(),
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def wait_until_stalled(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Until the command's pipe is full and stays so: the command waits for its reader."""
    assert proc.stdout is not None
    deadline, held, same = time.monotonic() + timeout, -1, 0
    while same < STALLED_POLLS:
        assert proc.poll() is None, "the command ended before its output filled the pipe"
        assert time.monotonic() < deadline, "the pipe never filled"
        time.sleep(0.05)
        now = struct.unpack("i", fcntl.ioctl(proc.stdout, termios.FIONREAD, b"\0" * 4))[0]
        same = same + 1 if now == held and now >= FULL else 0
        held = now


@pytest.mark.parametrize(
    ("follow", "signum", "code"),
    [
        (False, signal.SIGINT, 130),
        (False, signal.SIGTERM, 143),
        (True, signal.SIGINT, 0),
        (True, signal.SIGTERM, 0),
    ],
)
def test_a_signal_ends_the_command_while_it_is_blocked_writing(
    many_lines: Path, follow: bool, signum: int, code: int
) -> None:
    """A reader that stopped (a paused terminal, a stalled pipe) holds the command in a write:
    the signal still ends it, at once (the wait below only bounds a hang), quietly."""
    with stalled(["logs", *(["--follow"] if follow else []), str(many_lines)]) as proc:
        wait_until_stalled(proc)
        proc.send_signal(signum)
        assert proc.wait(timeout=5) == code
        assert proc.stderr is not None and quiet(proc.stderr.read().decode()) == ""


def test_ctrl_c_ends_a_follow_that_waits_for_lines(many_lines: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            [malaunch_executable(), "logs", "-f", str(many_lines)], stdout=sink,
            stderr=subprocess.PIPE, env=clean_env(),
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while out.stat().st_size < len(
            "[node 0 rank 0] line 199999\n"
        ) or not out.read_bytes().endswith(b"line 199999\n"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=5) == 0
        assert proc.stderr is not None and quiet(proc.stderr.read().decode()) == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    assert len(out.read_bytes().splitlines()) == 200_000
