"""Reading the stacks of hung ranks: py-spy dumps, faulthandler dumps, and real captures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Dict, Iterator, List, Optional

import pytest

from malaunch.hang.stacks import (
    LOG_TAIL,
    Stack,
    abort_for_faulthandler,
    faulthandler_from_log,
    find_py_spy,
    parse_faulthandler,
    parse_py_spy,
    py_spy_dumps,
)

NO_SUCH_PID = 2**31 - 1  # above any pid_max

# -- py-spy dumps -------------------------------------------------------------------------

PY_SPY_NAMED = """\
Process 12345: python train.py --epochs 3
Python v3.10.12 (/usr/bin/python3.10)

Thread 12345 (idle): "MainThread"
    wait (threading.py:320)
    get (queue.py:171)
    read_batch (/job/data.py:88)
    main (train.py:40)
    <module> (train.py:52)
Thread 12377 (idle): "Thread-1 (_worker)"
    select (selectors.py:416)
    _worker (prefetch.py:30)
    run (threading.py:953)
    _bootstrap_inner (threading.py:1016)
    _bootstrap (threading.py:973)
"""

MAIN_FRAMES = [
    "wait (threading.py:320)",
    "get (queue.py:171)",
    "read_batch (data.py:88)",
    "main (train.py:40)",
    "<module> (train.py:52)",
]


def test_py_spy_thread_with_a_name() -> None:
    assert parse_py_spy(PY_SPY_NAMED) == MAIN_FRAMES


def test_py_spy_thread_without_a_name() -> None:
    text = """\
Process 4242: /usr/bin/python3 -c import time
Python v3.11.7 (/usr/bin/python3.11)

Thread 4242 (active+gil)
    spin_here (<string>:3)
    <module> (<string>:4)
"""
    assert parse_py_spy(text) == ["spin_here (<string>:3)", "<module> (<string>:4)"]


def test_py_spy_main_thread_not_first() -> None:
    text = """\
Process 777: python train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 0x7F2B4C8E1640 (idle): "pt_autograd_0"
    wait (threading.py:327)
    run (threading.py:982)
    _bootstrap_inner (threading.py:1045)
    _bootstrap (threading.py:1002)
Thread 0x7F2B55A3C740 (active): "MainThread"
    all_reduce (distributed_c10d.py:2050)
    step (train.py:21)
    <module> (train.py:30)
Thread 0x7F2B4BFFF640 (idle): "Thread-2"
    select (selectors.py:415)
    run (threading.py:982)
"""
    assert parse_py_spy(text) == [
        "all_reduce (distributed_c10d.py:2050)",
        "step (train.py:21)",
        "<module> (train.py:30)",
    ]


def test_py_spy_unnamed_main_thread_not_first_is_found_by_its_module_frame() -> None:
    text = """\
Thread 31 (idle)
    wait (threading.py:327)
    _bootstrap (threading.py:1002)
Thread 30 (active)
    spin (train.py:5)
    <module> (train.py:9)
"""
    assert parse_py_spy(text) == ["spin (train.py:5)", "<module> (train.py:9)"]


def test_py_spy_main_thread_of_python_m_is_found_by_its_name() -> None:
    # With ``python -m`` the outermost frame is runpy's, not ``<module>``.
    text = """\
Thread 51 (idle): "Thread-1"
    wait (threading.py:327)
    _bootstrap (threading.py:1002)
Thread 50 (idle): "MainThread"
    spin (trainer/__main__.py:5)
    <module> (trainer/__main__.py:9)
    _run_code (<frozen runpy>:88)
    _run_module_as_main (<frozen runpy>:198)
"""
    assert parse_py_spy(text) == [
        "spin (__main__.py:5)",
        "<module> (__main__.py:9)",
        "_run_code (<frozen runpy>:88)",
        "_run_module_as_main (<frozen runpy>:198)",
    ]


def test_py_spy_without_threads() -> None:
    assert parse_py_spy("") == []
    assert parse_py_spy("Error: Failed to find python version from target process\n") == []
    # Frame-like lines before any thread header (a multi-line command line) are not frames.
    assert parse_py_spy("Process 1: python -c\n    f (a.py:1)\n") == []


# -- faulthandler dumps -------------------------------------------------------------------

FH_DUMP = """\
Fatal Python error: Aborted

Thread 0x00007f0b8d7fe640 (most recent call first):
  File "/usr/lib/python3.10/threading.py", line 320 in wait
  File "/usr/lib/python3.10/threading.py", line 1016 in _bootstrap_inner
  File "/usr/lib/python3.10/threading.py", line 973 in _bootstrap

Current thread 0x00007f0b93a4b740 (most recent call first):
  File "/job/train.py", line 12 in spin
  File "/job/train.py", line 40 in main
  File "/job/train.py", line 52 in <module>

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)
"""


def test_faulthandler_several_threads() -> None:
    assert parse_faulthandler(FH_DUMP) == [
        "spin (train.py:12)",
        "main (train.py:40)",
        "<module> (train.py:52)",
    ]


def test_faulthandler_main_thread_that_is_not_the_current_one() -> None:
    text = """\
Fatal Python error: Aborted

Current thread 0x00007f0b8d7fe640 (most recent call first):
  File "/usr/lib/python3.10/threading.py", line 320 in wait
  File "/usr/lib/python3.10/threading.py", line 973 in _bootstrap

Thread 0x00007f0b93a4b740 (most recent call first):
  File "/job/train.py", line 7 in loop
  File "/job/train.py", line 9 in <module>
"""
    assert parse_faulthandler(text) == ["loop (train.py:7)", "<module> (train.py:9)"]


def test_faulthandler_current_thread_when_no_module_frame() -> None:
    text = """\
Fatal Python error: Aborted

Thread 0x00007f0b8d7fe640 (most recent call first):
  File "/usr/lib/python3.10/threading.py", line 320 in wait

Current thread 0x00007f0b93a4b740 (most recent call first):
  File "/job/trainer/__main__.py", line 7 in loop
  File "<frozen runpy>", line 88 in _run_code
"""
    assert parse_faulthandler(text) == ["loop (__main__.py:7)", "_run_code (<frozen runpy>:88)"]


def test_faulthandler_uses_only_the_last_dump() -> None:
    earlier = FH_DUMP.replace("line 12 in spin", "line 99 in earlier_attempt")
    log = f"epoch 1\n{earlier}\nrestarting\nepoch 1\nepoch 2\n{FH_DUMP}"
    assert parse_faulthandler(log)[0] == "spin (train.py:12)"
    log = f"{FH_DUMP}\nepoch 2\n{earlier}"
    assert parse_faulthandler(log)[0] == "earlier_attempt (train.py:99)"


def test_faulthandler_nothing_without_a_dump() -> None:
    assert parse_faulthandler("") == []
    # Thread lines of something else (no "Fatal Python error") are not a dump.
    assert parse_faulthandler(FH_DUMP.replace("Fatal Python error: Aborted", "")) == []


def test_faulthandler_from_log_file(tmp_path: Path) -> None:
    log = tmp_path / "rank-3.log"
    earlier = FH_DUMP.replace("line 12 in spin", "line 99 in earlier_attempt")
    log.write_text(f"epoch 1\n{earlier}\nepoch 1 again\n{FH_DUMP}")
    stack = faulthandler_from_log(str(log))
    assert stack == Stack(
        frames=("spin (train.py:12)", "main (train.py:40)", "<module> (train.py:52)"),
        text=FH_DUMP,
        method="faulthandler",
    )


def test_faulthandler_from_the_tail_of_a_long_log(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    filler = "é loss=0.123\n" * (2 * LOG_TAIL // 13)
    log.write_text(f"{filler}{FH_DUMP}", encoding="utf-8")
    assert log.stat().st_size > 2 * LOG_TAIL
    stack = faulthandler_from_log(str(log))
    assert stack is not None
    assert stack.frames[0] == "spin (train.py:12)"
    assert stack.text == FH_DUMP


def test_faulthandler_from_log_without_a_dump(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    log.write_text("Traceback (most recent call last):\nValueError: x\n")
    assert faulthandler_from_log(str(log)) is None
    log.write_text("Fatal Python error: Aborted\n\n")
    assert faulthandler_from_log(str(log)) is None
    assert faulthandler_from_log(str(tmp_path / "missing.log")) is None


# -- real processes -----------------------------------------------------------------------

SLEEPER = """\
import sys, time
def malaunch_test_waits_here():
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    while True:
        time.sleep(0.05)
malaunch_test_waits_here()
"""


@pytest.fixture
def children() -> Iterator[List[subprocess.Popen[bytes]]]:
    """Children a test starts; each is killed (if still running) and reaped afterwards."""
    started: List[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()


def start_sleeper(
    children: List[subprocess.Popen[bytes]],
    cwd: Path,
    env: Optional[Dict[str, str]] = None,
    stderr: Optional[IO[bytes]] = None,
) -> subprocess.Popen[bytes]:
    """A Python child waiting in ``malaunch_test_waits_here``, once it is there."""
    child = subprocess.Popen(
        [sys.executable, "-c", SLEEPER],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        cwd=str(cwd),
        env=env,
    )
    children.append(child)
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"
    return child


def test_py_spy_reads_a_real_process(
    tmp_path: Path, children: List[subprocess.Popen[bytes]]
) -> None:
    py_spy = find_py_spy(os.environ)
    if py_spy is None:
        pytest.skip("py-spy is neither beside the interpreter nor on PATH")
    child = start_sleeper(children, tmp_path)
    found = py_spy_dumps(py_spy, [child.pid, NO_SUCH_PID])
    assert list(found) == [child.pid]  # the pid py-spy could not read is left out
    stack = found[child.pid]
    assert stack.method == "py-spy"
    assert stack.frames[0].startswith("malaunch_test_waits_here (<string>:")
    assert stack.frames[-1].startswith("<module> (<string>:")
    assert f"Process {child.pid}:" in stack.text  # the whole dump is kept
    assert child.poll() is None  # py-spy leaves the process running


def test_faulthandler_of_a_real_process(
    tmp_path: Path, children: List[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "rank-0.log"
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    with log.open("wb") as stderr:
        child = start_sleeper(children, tmp_path, env=env, stderr=stderr)
    assert abort_for_faulthandler(child.pid)
    assert child.wait(timeout=30) == -signal.SIGABRT
    stack = faulthandler_from_log(str(log))
    assert stack is not None
    assert stack.method == "faulthandler"
    assert stack.frames[0].startswith("malaunch_test_waits_here (<string>:")
    assert stack.frames[-1].startswith("<module> (<string>:")
    assert stack.text.startswith("Fatal Python error: Aborted")
    assert not list(tmp_path.glob("core*"))  # no core dump left behind


def test_abort_for_faulthandler_of_no_process() -> None:
    assert not abort_for_faulthandler(NO_SUCH_PID)
