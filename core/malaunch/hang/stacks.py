"""The Python stacks of hung ranks: py-spy where it can, faulthandler where it cannot.

**py-spy** (``py-spy dump --pid``) reads a live process from outside: every thread, no code in
the rank, nothing stopped for longer than the read (about 20 ms a process here). It needs the
``py-spy`` binary (``pip install 'malaunch[stacks]'``) and ptrace permission, which a parent
has over its children where Yama's ``ptrace_scope`` is 0 or 1 and the container allows ptrace.

**faulthandler** is the fallback that needs nothing: with hang detection on, the launcher
starts every process with ``PYTHONFAULTHANDLER=1``; ``SIGABRT`` then makes the interpreter
print every thread's stack to stderr (the rank's log) before it dies. It costs the rank its
life, which is acceptable only because the job is being stopped anyway; core dumps are turned
off for it first (``prlimit``). It sees Python frames only, and nothing of a process that is
not Python.

Either way the frames are normalised to ``func (file.py:line)``, innermost first, for the main
thread (the one whose outermost frame is ``<module>``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from malaunch.log import logger

PY_SPY_TIMEOUT = 10.0
LOG_TAIL = 256 * 1024  # faulthandler's dump is near the end of the log
# ``Thread 123 (idle): "MainThread"``, or without the name when py-spy cannot read it
_PY_SPY_THREAD = re.compile(r'^Thread (\S+) \([^)]*\)(: "(?P<name>[^"]*)")?')
_PY_SPY_FRAME = re.compile(r"^\s+(?P<func>.+?) \((?P<file>[^():]+):(?P<line>\d+)\)$")
_FH_THREAD = re.compile(
    r"^(?P<current>Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):"
)
_FH_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>.+)$')


@dataclasses.dataclass(frozen=True)
class Stack:
    """One process's stack: main-thread frames innermost first, and the whole dump."""

    frames: Tuple[str, ...]
    text: str
    method: str


def find_py_spy(environ: Mapping[str, str]) -> Optional[str]:
    """py-spy beside the launcher's interpreter (a virtualenv), else on ``PATH``."""
    beside = Path(sys.executable).with_name("py-spy")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy", path=environ.get("PATH"))


def py_spy_dumps(py_spy: str, pids: Sequence[int]) -> Dict[int, Stack]:
    """``py-spy dump`` of every pid, in parallel; pids it could not read are left out."""
    running = {
        pid: subprocess.Popen(
            [py_spy, "dump", "--pid", str(pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        for pid in pids
    }
    found: Dict[int, Stack] = {}
    for pid, proc in running.items():
        try:
            output, _ = proc.communicate(timeout=PY_SPY_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            continue
        text = output.decode("utf-8", "replace")
        frames = parse_py_spy(text)
        if proc.returncode == 0 and frames:
            found[pid] = Stack(tuple(frames), text, "py-spy")
        else:
            why = text.strip().splitlines()[-1] if text.strip() else f"exit {proc.returncode}"
            logger.warning(f"py-spy could not read pid {pid} (exit {proc.returncode}): {why}")
    return found


def parse_py_spy(text: str) -> List[str]:
    """The main thread's frames of a ``py-spy dump``, innermost first."""
    threads: List[Tuple[str, List[str]]] = []
    for line in text.splitlines():
        header = _PY_SPY_THREAD.match(line)
        if header:
            threads.append((header["name"] or "", []))
            continue
        frame = _PY_SPY_FRAME.match(line)
        if frame and threads:
            threads[-1][1].append(_frame(frame["func"], frame["file"], frame["line"]))
    return _main_thread(threads, main_name="MainThread")


def parse_faulthandler(text: str) -> List[str]:
    """The main thread's frames of the last faulthandler dump in ``text``, innermost first."""
    start = text.rfind("Fatal Python error")
    if start < 0:
        return []
    threads: List[Tuple[str, List[str]]] = []
    for line in text[start:].splitlines():
        header = _FH_THREAD.match(line)
        if header:
            threads.append((header["current"], []))
            continue
        frame = _FH_FRAME.match(line)
        if frame and threads:
            threads[-1][1].append(_frame(frame["func"], frame["file"], frame["line"]))
    return _main_thread(threads, main_name="Current thread")


def _frame(func: str, file: str, line: str) -> str:
    return f"{func.strip()} ({os.path.basename(file)}:{line})"


def _main_thread(threads: List[Tuple[str, List[str]]], main_name: str) -> List[str]:
    """The thread whose outermost frame is ``<module>``, else the named one, else the first."""
    for _, frames in threads:
        if frames and frames[-1].startswith("<module> ("):
            return frames
    for name, frames in threads:
        if name == main_name and frames:
            return frames
    return threads[0][1] if threads else []


def abort_for_faulthandler(pid: int) -> bool:
    """Make the process print its stacks and die (``SIGABRT``), without a core dump."""
    with contextlib.suppress(OSError, ValueError):
        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
    try:
        os.kill(pid, signal.SIGABRT)
    except OSError:
        return False
    return True


def faulthandler_from_log(log_file: str) -> Optional[Stack]:
    """The dump a faulthandler'd process left at the end of its log, if any."""
    try:
        with open(log_file, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - LOG_TAIL))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    frames = parse_faulthandler(text)
    if not frames:
        return None
    return Stack(tuple(frames), text[text.rfind("Fatal Python error") :], "faulthandler")
