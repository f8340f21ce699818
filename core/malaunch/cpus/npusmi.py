"""Ascend NPUs' CPU affinity from ``npu-smi info -t topo``.

The command prints a matrix of NPU links followed by a ``CPU Affinity`` column, one row per
NPU (an Atlas 800T A2)::

               NPU0   NPU1   ...   NPU7   CPU Affinity
    NPU0       X      HCCS   ...   HCCS   144-167
    NPU1       HCCS   X      ...   HCCS   0-23

The rows are numbered as npu-smi numbers NPUs, which is how rank tables and
``ASCEND_VISIBLE_DEVICES`` name them, and which need not be the PCI address order (on that
server NPU0 is 0000:c1:00.0 and NPU1 0000:01:00.0). So where npu-smi answers, it is the source
for Ascend NPUs, before sysfs.

It runs with a time limit and a bounded output: a hung or babbling tool costs a warning, not
the launch.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import time
from typing import Dict, FrozenSet, List, Mapping, Optional, Tuple

from malaunch.cpus.cpulist import parse_cpulist

ARGS = ("info", "-t", "topo")
COMMAND = "npu-smi " + " ".join(ARGS)
TIMEOUT = 10.0
LIMIT = 1 << 20
ROW = re.compile(r"NPU(\d{1,5})")


class NpuSmiError(Exception):
    """npu-smi could not be run or did not answer as documented; the text says why."""


def find(explicit: Optional[str], environ: Mapping[str, str]) -> Optional[str]:
    """The npu-smi to run: ``explicit`` (``--npu-smi``) as given, else ``npu-smi`` on PATH,
    else None (no Ascend tools here)."""
    if explicit:
        return explicit
    return shutil.which("npu-smi", path=environ.get("PATH"))


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: children that hold stdout too
    proc.wait()


def _read(proc: subprocess.Popen[bytes], deadline: float) -> bytes:
    assert proc.stdout is not None  # started with stdout=PIPE
    fd = proc.stdout.fileno()
    chunks: List[bytes] = []
    total = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            msg = f"no answer within {TIMEOUT:g} s"
            raise NpuSmiError(msg)
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > LIMIT:
            msg = f"printed more than {LIMIT} bytes"
            raise NpuSmiError(msg)
        chunks.append(chunk)


def run(executable: str) -> str:
    """``npu-smi info -t topo``'s output; NpuSmiError if it cannot run, fails or hangs."""
    try:
        proc = subprocess.Popen(
            [executable, *ARGS],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        msg = f"cannot run {executable}: {exc.strerror or exc}"
        raise NpuSmiError(msg) from exc
    deadline = time.monotonic() + TIMEOUT
    try:
        output = _read(proc, deadline)
        # Its output ended; the exit follows at once (a tool still running is stopped below).
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        _stop(proc)
        assert proc.stdout is not None
        proc.stdout.close()
    if proc.returncode != 0:
        msg = f"exit code {proc.returncode}"
        raise NpuSmiError(msg)
    return output.decode("utf-8", errors="replace")


def _header(lines: List[str]) -> Tuple[int, int]:
    """(line index of the header, index of the CPU Affinity column among a row's cells after
    the NPU name)."""
    for number, line in enumerate(lines):
        words = line.split()
        for index in range(len(words) - 1):
            if words[index] == "CPU" and words[index + 1] == "Affinity":
                return number, index
    msg = "its output has no CPU Affinity column"
    raise NpuSmiError(msg)


def parse(text: str) -> Dict[int, FrozenSet[int]]:
    """NPU id -> its CPU affinity; NpuSmiError if the text is not the documented table."""
    lines = text.splitlines()
    header, column = _header(lines)
    affinity: Dict[int, FrozenSet[int]] = {}
    for line in lines[header + 1 :]:
        words = line.split()
        match = ROW.fullmatch(words[0]) if words else None
        if match is None:
            continue
        if len(words) <= column + 1:
            msg = f"row {words[0]} has no CPU Affinity value"
            raise NpuSmiError(msg)
        try:
            affinity[int(match.group(1))] = parse_cpulist(words[column + 1])
        except ValueError as exc:
            msg = f"row {words[0]}: CPU Affinity {exc}"
            raise NpuSmiError(msg) from exc
    if not affinity:
        msg = "its output lists no NPU"
        raise NpuSmiError(msg)
    return affinity


def read_affinity(
    explicit: Optional[str], environ: Mapping[str, str]
) -> Tuple[Dict[int, FrozenSet[int]], Optional[str]]:
    """(NPU id -> CPUs, problem): empty without npu-smi; the problem says why it failed."""
    executable = find(explicit, environ)
    if executable is None:
        return {}, None
    try:
        return parse(run(executable)), None
    except NpuSmiError as exc:
        return {}, f"{COMMAND}: {exc}"
