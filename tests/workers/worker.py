"""A tiny worker for supervisor tests and benchmarks: does what its options say, in order.

--pid-dir DIR      add to DIR/<name>.pids: own pid, then the pids of its children (once ready)
--child            start a grandchild (sleeps) in the same process group, listed in the pid file
--setsid-child     start a grandchild (sleeps) in a session of its own, holding our stdout
--ignore-term      ignore SIGTERM (the supervisor must SIGKILL it after the grace period)
--on-usr1 FILE     on SIGUSR1, write FILE (forwarded-signal tests)
--env-out FILE     append "RANK MALAUNCH_RESTART_COUNT" to FILE
--lines N          print N numbered lines (--block: write them in large blocks)
--partial TEXT     print TEXT without a trailing newline
--done-file FILE   create FILE once its lines are out
--wait-files F...  wait until these files exist (other ranks' --done-file)
--fail-before K    exit 1 here while MALAUNCH_RESTART_COUNT < K (restart tests)
--fail-rank R      ranks other than R just sleep after starting (R does the rest)
--sleep S          sleep S seconds
--kill-self SIG    end by sending itself signal SIG
--exit N           end with exit code N
"{restart}" in a file name stands for MALAUNCH_RESTART_COUNT, "{rank}" for RANK.
Started with ``python -S``: nothing but the standard library is needed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from typing import List


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid-dir")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--setsid-child", action="store_true")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--on-usr1")
    parser.add_argument("--env-out")
    parser.add_argument("--fail-before", type=int, default=0)
    parser.add_argument("--lines", type=int, default=0)
    parser.add_argument("--block", action="store_true")
    parser.add_argument("--partial")
    parser.add_argument("--done-file")
    parser.add_argument("--wait-files", nargs="*", default=[])
    parser.add_argument("--fail-rank")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--kill-self")
    parser.add_argument("--exit", type=int, default=0)
    return parser.parse_args()


def name() -> str:
    rank = os.environ.get("RANK")
    return f"rank{rank}" if rank is not None else os.environ.get("WORKER_NAME", str(os.getpid()))


def write_pids(pid_dir: str, pids: List[int]) -> None:
    # Appended in one write: a restarted rank adds its pids to those of earlier attempts.
    fd = os.open(os.path.join(pid_dir, f"{name()}.pids"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(fd, "".join(f"{pid}\n" for pid in pids).encode())
    os.close(fd)


def print_lines(count: int, block: bool) -> None:
    label = name()
    out = sys.stdout
    if block:
        step = 5000
        for start in range(0, count, step):
            end = min(count, start + step)
            out.write("".join(f"{label} line {i}\n" for i in range(start, end)))
    else:
        for i in range(count):
            out.write(f"{label} line {i}\n")
    out.flush()


def start(args: argparse.Namespace, restart: int) -> None:
    """Signal handlers, the optional child, the pid file and the env record."""
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.on_usr1:
        signal.signal(signal.SIGUSR1, lambda *_: open(args.on_usr1, "w").close())
    pids = [os.getpid()]
    if args.child:
        sleeper = [sys.executable, "-S", "-c", "import time; time.sleep(600)"]
        pids.append(subprocess.Popen(sleeper).pid)
    if args.setsid_child:
        sleeper = [sys.executable, "-S", "-c", "import time; time.sleep(600)"]
        pids.append(subprocess.Popen(sleeper, start_new_session=True).pid)
    if args.pid_dir:
        write_pids(args.pid_dir, pids)
    if args.env_out:
        with open(args.env_out, "a") as handle:
            handle.write(f"{os.environ.get('RANK')} {restart}\n")


def finish(args: argparse.Namespace, restart: int) -> None:
    """Output, waiting, and the chosen way to end."""
    print_lines(args.lines, args.block)
    if args.partial:
        sys.stdout.write(args.partial)
        sys.stdout.flush()
    if args.done_file:
        open(args.done_file, "w").close()
    while not all(os.path.exists(path) for path in args.wait_files):
        time.sleep(0.01)
    if restart < args.fail_before:
        sys.exit(1)
    if args.sleep:
        time.sleep(args.sleep)
    if args.kill_self:
        os.kill(os.getpid(), getattr(signal, args.kill_self))
        time.sleep(10)
    sys.exit(args.exit)


def main() -> None:
    args = parse()
    restart = int(os.environ.get("MALAUNCH_RESTART_COUNT", "-1"))

    def expand(path: str) -> str:
        return path.replace("{restart}", str(restart)).replace("{rank}", os.environ.get("RANK", ""))

    if args.env_out:
        args.env_out = expand(args.env_out)
    if args.done_file:
        args.done_file = expand(args.done_file)
    args.wait_files = [expand(path) for path in args.wait_files]
    start(args, restart)
    if args.fail_rank is not None and os.environ.get("RANK") != args.fail_rank:
        time.sleep(600)
    finish(args, restart)


if __name__ == "__main__":
    main()
