"""`malaunch logs` benchmark: following a chatty job live, then reading the finished run.

    .venv/bin/python benchmarks/bench_logs.py [--reps 3] [--lines 200000]

A real `malaunch --framework torch_ddp --topology local --nproc-per-node 4` job runs workers
that write ``rank R line I`` lines in 64 KiB blocks (as bench_supervisor.py's "lines" worker),
while `malaunch logs --follow` runs on its log dir with stdout to a file. The workers wait for
a go file, so the follower is polling before the first line is written. Measured:

- lines/s the follower delivered, from the go file to the last byte of its output;
- whether it kept up: every line delivered, none lost, none twice, none garbled, each rank's
  lines in their order;
- the time to drain: from the job's end to the follower's last byte;
- the follower's CPU while the job ran, and while idle afterwards (polling, no busy loop);
- `malaunch logs DIR` (no follow) on the finished dir: wall time and lines/s, and with a
  ``--grep`` that keeps 1 line in 1,000.

Nothing here asserts a time: this is a measurement; the tests are in tests/.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

MALAUNCH = str(Path(sys.executable).with_name("malaunch"))
RANKS = 4
IDLE = 2.0  # seconds of idle following measured after the job

WORKER = r"""
import io, os, sys, time
rank, lines, go = int(os.environ["RANK"]), int(sys.argv[1]), sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.005)
out = io.open(1, "wb", buffering=1 << 16, closefd=False)
for start in range(0, lines, 1000):
    out.write(b"".join(b"rank %d line %d\n" % (rank, i)
                       for i in range(start, min(start + 1000, lines))))
out.flush()
"""

LINE = re.compile(rb"\[node 0 rank (\d)\] rank (\d) line (\d+)")


def cpu_seconds(pid: int) -> float:
    """CPU time of a process (all threads), from the scheduler's nanosecond counters."""
    total = 0
    for path in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(path.read_text().split()[0])
    return total / 1e9


def expected_bytes(lines: int) -> int:
    return sum(
        len(b"[node 0 rank %d] rank %d line %d\n" % (rank, rank, i))
        for rank in range(RANKS)
        for i in range(lines)
    )


def check(output: bytes, lines: int) -> Dict[str, int]:
    """Lost, duplicated, garbled and out-of-order lines against what the workers wrote."""
    seen = [bytearray(lines) for _ in range(RANKS)]
    last = [-1] * RANKS
    garbled = duplicated = disorder = 0
    for line in output.split(b"\n")[:-1]:
        match = LINE.fullmatch(line)
        if match is None or match[1] != match[2] or int(match[3]) >= lines:
            garbled += 1
            continue
        rank, index = int(match[1]), int(match[3])
        duplicated += seen[rank][index]
        seen[rank][index] = 1
        disorder += index < last[rank]
        last[rank] = max(last[rank], index)
    lost = sum(lines - sum(flags) for flags in seen)
    return {"lost": lost, "duplicated": duplicated, "garbled": garbled, "disorder": disorder}


def wait_until(condition: Callable[[], bool], timeout: float, step: float = 0.002) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def stop(proc: subprocess.Popen[bytes]) -> Optional[int]:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
    return proc.wait()


def follow_once(work: Path, lines: int) -> Tuple[Dict[str, float], str]:
    """One job followed live: the figures of the module docstring, and the job's log dir."""
    run = Path(tempfile.mkdtemp(dir=work))
    script, go, logs = run / "worker.py", run / "go", run / "logs"
    script.write_text(WORKER)
    job_argv = [
        MALAUNCH, "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node",
        str(RANKS), "--log-dir", str(logs), "--console-ranks", "none", "--",
        sys.executable, "-S", str(script), str(lines), str(go),
    ]  # fmt: skip
    job = subprocess.Popen(job_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    follower: Optional[subprocess.Popen[bytes]] = None
    try:
        wait_until((logs / "malaunch-run.json").exists, 30)
        with open(run / "followed.txt", "wb") as sink:
            follower = subprocess.Popen([MALAUNCH, "logs", "--follow", str(logs)], stdout=sink)
        return measure(job, follower, run, lines), str(logs)
    finally:
        for proc in (follower, job):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def measure(
    job: subprocess.Popen[bytes], follower: subprocess.Popen[bytes], run: Path, lines: int
) -> Dict[str, float]:
    """Let the workers go; time the job and the follower's delivery; check what it printed."""
    out = run / "followed.txt"
    time.sleep(1.0)  # the follower's start-up, and a few empty polls
    cpu_before = cpu_seconds(follower.pid)
    (run / "go").touch()
    start = time.monotonic()
    job.wait(timeout=120)
    job_end = time.monotonic()
    total = expected_bytes(lines)
    drained = wait_until(lambda: out.stat().st_size >= total, 120)
    done = time.monotonic()
    cpu_job = cpu_seconds(follower.pid) - cpu_before
    time.sleep(IDLE)
    cpu_idle = cpu_seconds(follower.pid) - cpu_before - cpu_job
    code = stop(follower)
    figures = check(out.read_bytes(), lines)
    return {
        "job": job_end - start,
        "delivered": done - start,
        "rate": RANKS * lines / (done - start),
        "drain": done - job_end,
        "cpu_job": cpu_job,
        "cpu_idle": 100 * cpu_idle / IDLE,
        "drained": float(drained),
        "code": float(code if code is not None else -1),
        **{key: float(value) for key, value in figures.items()},
    }


def read_once(logs: str, lines: int, *extra: str) -> Dict[str, float]:
    """`malaunch logs DIR` on a finished run, stdout to a file."""
    out = Path(logs).parent / "read.txt"
    with open(out, "wb") as sink:
        start = time.monotonic()
        code = subprocess.run([MALAUNCH, "logs", logs, *extra], stdout=sink, check=False)
        wall = time.monotonic() - start
    data = out.read_bytes()
    figures = check(data, lines) if not extra else {"lines": data.count(b"\n")}
    return {"wall": wall, "rate": RANKS * lines / wall, "code": float(code.returncode), **figures}


def median(values: List[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--lines", type=int, default=200_000, help="lines per rank")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-logs-"))
    try:
        runs = [follow_once(work, args.lines) for _ in range(args.reps)]
        follows = [figures for figures, _ in runs]
        reads = [read_once(logs, args.lines) for _, logs in runs]
        greps = [read_once(logs, args.lines, "--grep", "line [0-9]*999$") for _, logs in runs]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(follows, reads, greps, args.lines)


def report(
    follows: List[Dict[str, float]],
    reads: List[Dict[str, float]],
    greps: List[Dict[str, float]],
    lines: int,
) -> None:
    def cell(rows: List[Dict[str, float]], key: str, fmt: str) -> str:
        return fmt.format(median([row[key] for row in rows]))

    total = f"{RANKS} x {lines:,} lines"
    kept = all(
        f["drained"] and f["lost"] == f["duplicated"] == f["garbled"] == f["disorder"] == 0
        for f in follows
    )
    print(f"| {total}, median of {len(follows)} | figure |")
    print("|---|---|")
    print(f"| job: go -> its exit | {cell(follows, 'job', '{:.3f} s')} |")
    print(
        f"| `logs --follow`: go -> last line delivered | {cell(follows, 'delivered', '{:.3f} s')} |"
    )
    print(f"| `logs --follow`: lines/s delivered | {cell(follows, 'rate', '{:,.0f}')} |")
    print(f"| `logs --follow`: drain after the job's exit | {cell(follows, 'drain', '{:.3f} s')} |")
    print(
        f"| `logs --follow`: kept up (all delivered; lost / twice / garbled / out of order) | "
        f"{'yes' if kept else 'NO'} ({sum(f['lost'] for f in follows):.0f} / "
        f"{sum(f['duplicated'] for f in follows):.0f} / {sum(f['garbled'] for f in follows):.0f}"
        f" / {sum(f['disorder'] for f in follows):.0f} over {len(follows)} runs) |"
    )
    print(f"| `logs --follow`: CPU while the job ran | {cell(follows, 'cpu_job', '{:.3f} s')} |")
    print(f"| `logs --follow`: CPU idle afterwards | {cell(follows, 'cpu_idle', '{:.2f} %')} |")
    print(f"| `logs --follow`: exit code on SIGTERM | {cell(follows, 'code', '{:.0f}')} |")
    lost = sum(r["lost"] + r["duplicated"] + r["garbled"] + r["disorder"] for r in reads)
    print(f"| `logs DIR` (finished run): wall | {cell(reads, 'wall', '{:.3f} s')} |")
    print(f"| `logs DIR`: lines/s; lines wrong | {cell(reads, 'rate', '{:,.0f}')}; {lost:.0f} |")
    print(
        f"| `logs DIR --grep 'line [0-9]*999$'`: wall, lines | {cell(greps, 'wall', '{:.3f} s')}, "
        f"{cell(greps, 'lines', '{:.0f}')} |"
    )


if __name__ == "__main__":
    main()
