"""`malaunch logs --grep` (RE2) against Python's re, and how soon a signal ends `malaunch logs`.

    .venv/bin/python benchmarks/bench_logs_grep.py [--reps 5] [--lines 200000]

1. A catastrophic pattern, ``(a+)+$``, on a line of N ``a`` and one ``!``: Python's ``re``
   (in a child process, stopped after 30 s) and ``malaunch.logs.select.Grep`` (RE2).
2. A real job's finished log dir (one rank printing ``line I`` N times): ``malaunch logs DIR
   --grep P`` wall time for a pattern that keeps 1 line in 1,000, one that keeps every other
   line and one that keeps all, median of the runs.
3. From a signal to the end of ``malaunch logs``: reading once into a pipe nobody reads
   (waiting for room), following into such a pipe, and following with nothing new (waiting
   between polls). Median and worst of the runs.

Nothing here asserts a time: this is a measurement; the tests are in tests/.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from malaunch.logs.select import Grep

MALAUNCH = str(Path(sys.executable).with_name("malaunch"))
RE_TIMEOUT = 30.0
Ready = Callable[["subprocess.Popen[bytes]"], bool]  # whether to send the signal now
PYTHON_RE = "import re, sys; re.search(r'(a+)+$', 'a' * int(sys.argv[1]) + '!')"


def time_python_re(length: int) -> Optional[float]:
    """Seconds Python's re takes on the line, or None past RE_TIMEOUT."""
    start = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-c", PYTHON_RE, str(length)], timeout=RE_TIMEOUT,
                       check=True)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    return time.perf_counter() - start


def time_re2(length: int) -> float:
    grep = Grep("(a+)+$")
    start = time.perf_counter()
    grep.lines("a" * length + "!\n")
    return time.perf_counter() - start


def catastrophic() -> None:
    print("| line length | Python re | RE2 (Grep) |\n|---|---|---|")
    for length in (20, 22, 24, 26, 27, 5_000, 1_000_000):
        python = time_python_re(length) if length <= 27 else None
        shown = f"{python:.3f} s" if python is not None else f"> {RE_TIMEOUT:.0f} s (stopped)"
        if length > 27:
            shown = "not tried (doubles with each character)"
        print(f"| {length:,} | {shown} | {time_re2(length) * 1000:.3f} ms |")


def make_run(folder: Path, lines: int) -> Path:
    script = folder / "lines.py"
    script.write_text(f"for i in range({lines}): print('line', i)\n", encoding="utf-8")
    log_dir = folder / "run"
    subprocess.run(
        [MALAUNCH, "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "1",
         "--console-ranks", "none", "--log-dir", str(log_dir), "--", sys.executable,
         str(script)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return log_dir


def grep_walls(log_dir: Path, reps: int) -> None:
    print("| `logs DIR --grep P` | lines printed | wall (median) |\n|---|---|---|")
    for pattern in ("line [0-9]*999$", "[02468]$", "line"):
        walls, printed = [], 0
        for _ in range(reps):
            start = time.perf_counter()
            result = subprocess.run(
                [MALAUNCH, "logs", str(log_dir), "--grep", pattern],
                check=True, capture_output=True,
            )  # fmt: skip
            walls.append(time.perf_counter() - start)
            printed = result.stdout.count(b"\n")
        print(f"| `{pattern}` | {printed:,} | {statistics.median(walls):.3f} s |")


def stalled() -> Ready:
    """Whether the command's pipe is full and has not changed over 5 looks: it waits for
    room (in a write, or in the console writer's poll)."""
    seen: List[int] = []

    def check(proc: subprocess.Popen[bytes]) -> bool:
        assert proc.stdout is not None
        held = struct.unpack("i", fcntl.ioctl(proc.stdout, termios.FIONREAD, b"\0" * 4))[0]
        seen.append(held)
        time.sleep(0.04)
        return len(seen) > 5 and held >= 32 << 10 and len(set(seen[-5:])) == 1

    return check


def stop_latency(args: List[str], ready: Callable[[subprocess.Popen[bytes]], bool]) -> float:
    """Seconds from SIGINT to the command's end, once ``ready(proc)``."""
    proc = subprocess.Popen([MALAUNCH, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not ready(proc) and time.monotonic() < deadline:
            time.sleep(0.01)
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        return time.perf_counter() - sent
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def idle() -> Ready:
    """Whether the command has run 2 s: past its first read, polling."""
    start = time.monotonic()
    return lambda _proc: time.monotonic() - start > 2.0


def stop_latencies(log_dir: Path, reps: int) -> None:
    cases: Dict[str, Tuple[List[str], Callable[[], Ready]]] = {
        "read once, waiting for a stalled pipe": (["logs", str(log_dir)], stalled),
        "--follow, waiting for a stalled pipe": (["logs", "-f", str(log_dir)], stalled),
        "--follow, idle between polls": (["logs", "-f", str(log_dir), "--grep", "^$"], idle),
    }
    print("| SIGINT while ... | to exit: median | worst |\n|---|---|---|")
    for what, (args, ready) in cases.items():
        seconds = [stop_latency(args, ready()) for _ in range(reps)]
        print(f"| {what} | {statistics.median(seconds) * 1000:.1f} ms | "
              f"{max(seconds) * 1000:.1f} ms |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--lines", type=int, default=200_000)
    args = parser.parse_args()
    catastrophic()
    with tempfile.TemporaryDirectory() as folder:
        log_dir = make_run(Path(folder), args.lines)
        print()
        grep_walls(log_dir, args.reps)
        print()
        stop_latencies(log_dir, args.reps)


if __name__ == "__main__":
    main()
