"""Supervisor benchmark: malaunch against torchrun and the plain-python floor, in one run.

    .venv/bin/python benchmarks/bench_supervisor.py [--torchrun PATH] [--reps N]
        [--only LAUNCHER,...] [--rows TEXT,...] [--relay]

``--relay`` measures only the console relay in-process: MB/s of several kinds of output
(plain, CJK, coloured, progress bars, hostile controls) escaped and raw.

Prints a markdown table (median of ``--reps`` runs per cell). Launchers:

- floor: this script starts the workers itself with ``subprocess`` (no launcher at all);
- malaunch: the installed command, ``malaunch --framework torch_ddp --topology local``;
- malaunch dedup+prefix: the same with ``--console-dedup --console-prefix '[{node}/{rank}] '``;
- malaunch --console-raw: the same without escaping terminal controls on the console;
- supervise(): ``supervise()`` called from a minimal script (the supervisor without the CLI);
- torchrun: ``torchrun --standalone --no-python`` from a venv with torch (``--torchrun`` or
  ``$BENCH_TORCHRUN``, a path or a name on PATH, default the ``torchrun`` beside this
  interpreter); its columns are skipped if absent.

Every launcher runs the same worker script with the same interpreter (``python -S``). Workers
write a start stamp (wall time, pid, child pid) into a directory, so "started" is measured where
it happens. Nothing here asserts a time: this is a measurement, the tests are in tests/.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
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
from typing import Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
BODY = re.compile(rb"rank (\d+) line (\d+)")
MALAUNCH = str(Path(sys.executable).with_name("malaunch"))
LINES = 200_000

WORKER = r"""
import io, os, signal, subprocess, sys, time
start = time.time()
mode, stamps = os.environ["BENCH_MODE"], os.environ["BENCH_DIR"]
rank = int(os.environ.get("RANK", "0"))
child = 0
if mode == "child":
    child = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)"]).pid
if mode == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(os.path.join(stamps, "%d.tmp" % os.getpid()), "w") as f:
    f.write("%r %d %d" % (start, os.getpid(), child))
os.rename(os.path.join(stamps, "%d.tmp" % os.getpid()), os.path.join(stamps, "%d" % os.getpid()))
if mode == "exit":
    sys.exit(0)
if mode == "lines":
    out = io.open(1, "wb", buffering=1 << 16, closefd=False)
    for start_line in range(0, 200000, 1000):
        out.write(b"".join(b"rank %d line %d\n" % (rank, i)
                           for i in range(start_line, start_line + 1000)))
    out.flush()
    sys.exit(0)
if mode == "fail" and rank == 3:
    want = int(os.environ["BENCH_NPROC"])
    while len([n for n in os.listdir(stamps) if not n.endswith(".tmp")]) < want:
        time.sleep(0.005)
    open(os.path.join(stamps, "failed-at"), "w").write(repr(time.time()))
    sys.exit(3)
time.sleep(60)
"""


# -- measuring ------------------------------------------------------------------------------


def stamps(directory: Path) -> List[List[float]]:
    """(start time, pid, child pid) of every worker that has started."""
    found = []
    for path in directory.iterdir():
        if path.name.isdigit():
            start, pid, child = path.read_text().split()
            found.append([float(start), int(pid), int(child)])
    return found


def wait_for_stamps(directory: Path, count: int, timeout: float = 120.0) -> List[List[float]]:
    deadline = time.monotonic() + timeout
    while True:
        found = stamps(directory)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.002)


def cpu_seconds(pid: int) -> float:
    """CPU time of a process (all threads), from the scheduler's nanosecond counters."""
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            total += int(Path(path).read_text().split()[0])
        except (OSError, IndexError):
            continue
    return total / 1e9


def helpers_of(pid: int, workers: List[int]) -> List[int]:
    """The launcher's own helper processes (malaunch's reaper): children that are not workers."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(c) for c in children if int(c) not in workers]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def kill_all(pids: List[int]) -> None:
    for pid in pids:
        if pid and alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


# -- launchers ------------------------------------------------------------------------------


class Run:
    """One launch: a launcher process (or the floor's workers), its stamp dir and log dir."""

    def __init__(self, workdir: Path, mode: str, nproc: int) -> None:
        self.dir = Path(tempfile.mkdtemp(dir=workdir))
        self.stamps = self.dir / "stamps"
        self.logs = self.dir / "logs"
        self.stamps.mkdir()
        self.mode, self.nproc = mode, nproc
        self.script = self.dir / "worker.py"
        self.script.write_text(WORKER)
        self.env = {
            **os.environ,
            "BENCH_MODE": mode,
            "BENCH_DIR": str(self.stamps),
            "BENCH_NPROC": str(nproc),
            "PYTHONUNBUFFERED": "",
        }
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.t0 = 0.0

    def worker_argv(self) -> List[str]:
        return [sys.executable, "-S", str(self.script)]

    def start(self, argv: List[str], stdout: int = subprocess.DEVNULL) -> None:
        self.t0 = time.time()
        self.proc = subprocess.Popen(
            argv, env=self.env, stdout=stdout, stderr=subprocess.DEVNULL, cwd=self.dir
        )

    def wait(self, timeout: float = 120.0) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -999

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        kill_all([int(p) for s in stamps(self.stamps) for p in s[1:]])


def malaunch_argv(run: Run, grace: float) -> List[str]:
    return [
        MALAUNCH,
        "--framework",
        "torch_ddp",
        "--topology",
        "local",
        "--nproc-per-node",
        str(run.nproc),
        "--log-dir",
        str(run.logs),
        "--grace-period",
        str(grace),
        "--",
        *run.worker_argv(),
    ]


def raw_argv(run: Run, grace: float) -> List[str]:
    """malaunch with --console-raw: the console copy without terminal escaping."""
    argv = malaunch_argv(run, grace)
    at = argv.index("--")
    return [*argv[:at], "--console-raw", *argv[at:]]


def dedup_argv(run: Run, grace: float) -> List[str]:
    """malaunch with --console-dedup and a --console-prefix template: the per-line path."""
    argv = malaunch_argv(run, grace)
    at = argv.index("--")
    return [*argv[:at], "--console-dedup", "--console-prefix", "[{node}/{rank}] ", *argv[at:]]


# The console prefix each launcher must put on a line printed by ``ranks`` (one rank, or several
# whose identical lines --console-dedup folded), spelled out here from the documented forms
# rather than taken from malaunch, so a launcher that gets it wrong is caught.
Prefix = Callable[[List[int]], bytes]


def default_prefix(ranks: List[int]) -> bytes:
    """``[rank 3] ``; folded ``[ranks 0-3] ``."""
    return b"[rank %d] " % ranks[0] if len(ranks) == 1 else b"[ranks %s] " % _span(ranks)


def dedup_prefix(ranks: List[int]) -> bytes:
    """dedup_argv's template ``[{node}/{rank}] ``: ``[0/3] ``; folded, the span ``[0/0-3] ``."""
    return b"[0/%s] " % _span(ranks)


def _span(ranks: List[int]) -> bytes:
    """``0-2,5``: the ranks, sorted, runs written as ranges."""
    runs: List[List[int]] = []
    for rank in sorted(ranks):
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    return b",".join(b"%d-%d" % (a, b) if a != b else b"%d" % a for a, b in runs)


DRIVER = """
import sys
from loguru import logger
from malaunch.models import LaunchPlan, Node, ProcessSpec, Topology
from malaunch.supervisor.supervise import SuperviseOptions, supervise
nproc, logs, grace, argv = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4:]
logger.remove()
logger.add(sys.stderr, format="malaunch: {message}")
topo = Topology(source="local", nodes=(Node(index=0, host="127.0.0.1"),), node_rank=0,
                master_addr="127.0.0.1")
specs = tuple(ProcessSpec(role="worker", rank=r, local_rank=r, argv=tuple(argv),
                          env={"RANK": str(r)}, cwd=".", log_file=f"{logs}/rank{r}.log")
              for r in range(nproc))
plan = LaunchPlan(framework="bench", topology=topo, processes=specs)
sys.exit(supervise(plan, SuperviseOptions(log_dir=logs, grace_period=grace,
                                           forward_signals=(1, 2, 15))))
"""


def driver_argv(run: Run, grace: float) -> List[str]:
    return [
        sys.executable,
        "-c",
        DRIVER,
        str(run.nproc),
        str(run.logs),
        str(grace),
        *run.worker_argv(),
    ]


def torchrun_argv(torchrun: str) -> Callable[[Run, float], List[str]]:
    def argv(run: Run, _grace: float) -> List[str]:
        # torchrun has no grace option: its agent waits 30 s between SIGTERM and SIGKILL.
        return [
            torchrun,
            "--standalone",
            "--nproc-per-node",
            str(run.nproc),
            "--log-dir",
            str(run.logs),
            "--redirects",
            "3",
            "--no-python",
            *run.worker_argv(),
        ]

    return argv


class Floor:
    """No launcher: the benchmark starts the workers itself."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.procs: List[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        self.run.t0 = time.time()
        self.run.logs.mkdir()
        for rank in range(self.run.nproc):
            with open(self.run.logs / f"rank{rank}.log", "wb") as log:
                self.procs.append(
                    subprocess.Popen(
                        self.run.worker_argv(),
                        env={**self.run.env, "RANK": str(rank)},
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )

    def wait_fail_fast(self) -> int:
        """The least a launcher must do: wait for the first failure, kill the rest."""
        code = 0
        while any(p.returncode is None for p in self.procs):
            pid, status = os.wait()
            proc = next(p for p in self.procs if p.pid == pid)
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0 and code == 0:
                code = proc.returncode
                for other in self.procs:
                    if other.returncode is None:
                        os.killpg(other.pid, signal.SIGKILL)
        return code


# -- scenarios ------------------------------------------------------------------------------

Argv = Callable[[Run, float], List[str]]


class Bench:
    """Runs each scenario for one launcher kind; ``None`` argv means the floor."""

    def __init__(self, workdir: Path, argv: Optional[Argv], prefix: Optional[Prefix]) -> None:
        self.workdir = workdir
        self.argv = argv
        self.prefix = prefix  # the console prefix its lines must carry (None: not checked)

    def launch(self, mode: str, nproc: int, grace: float = 5.0, stdout: int = -3) -> Run:
        run = Run(self.workdir, mode, nproc)
        if self.argv is None:
            floor = Floor(run)
            floor.start()
            run.floor = floor  # type: ignore[attr-defined]
        else:
            run.start(self.argv(run, grace), stdout=stdout)
        return run

    def started(self, nproc: int) -> float:
        """Seconds from the launch command to the start of its last worker."""
        run = self.launch("exit", nproc)
        try:
            last = max(s[0] for s in wait_for_stamps(run.stamps, nproc))
            self.finish(run)
            return last - run.t0
        finally:
            run.cleanup()

    def whole(self) -> float:
        """Seconds for the whole command: 8 workers that exit at once."""
        run = self.launch("exit", 8)
        try:
            self.finish(run)
            return time.time() - run.t0
        finally:
            run.cleanup()

    def fail_fast(self) -> tuple[float, int]:
        """Seconds from a worker's failing exit to the launcher's exit, and its exit code."""
        run = self.launch("fail", 8)
        try:
            code = self.finish(run)
            ended = time.time()
            return ended - float((run.stamps / "failed-at").read_text()), code
        finally:
            run.cleanup()

    def stop(self, mode: str, grace: float) -> tuple[float, int]:
        """Seconds from SIGTERM to the launcher's exit (8 sleeping workers), and its code."""
        run = self.launch(mode, 8, grace=grace)
        try:
            wait_for_stamps(run.stamps, 8)
            assert run.proc is not None
            sent = time.time()
            run.proc.send_signal(signal.SIGTERM)
            code = run.wait(timeout=90)
            return time.time() - sent, code
        finally:
            run.cleanup()

    def cpu(self, idle: float) -> tuple[float, float]:
        """Launcher CPU seconds until the last of 8 workers started; idle CPU in % of a core."""
        run = self.launch("sleep", 8)
        try:
            found = wait_for_stamps(run.stamps, 8)
            assert run.proc is not None
            workers = [int(s[1]) for s in found]
            pids = [run.proc.pid, *helpers_of(run.proc.pid, workers)]
            startup = sum(cpu_seconds(pid) for pid in pids)
            time.sleep(idle)
            idle_cpu = sum(cpu_seconds(pid) for pid in pids) - startup
            run.proc.send_signal(signal.SIGTERM)
            run.wait()
            return startup, 100.0 * idle_cpu / idle
        finally:
            run.cleanup()

    def lines(self) -> tuple[float, int]:
        """Seconds for 4 workers x 200,000 lines, and how many lines are missing or garbled:
        every log must hold its rank's lines exactly, in order; a launcher's console copy
        (prefixed, deduplicated or not) must hold every line once, with exactly the prefix
        :attr:`prefix` gives for the ranks that printed it."""
        with tempfile.TemporaryFile(dir=self.workdir) as console:
            run = self.launch("lines", 4, stdout=console.fileno())
            try:
                self.finish(run)
                wall = time.time() - run.t0
                logs = [p for p in run.logs.rglob("*.log") if p.is_file()]
                bad = 4 * LINES - sum(_good_lines(p.read_bytes()) for p in logs)
                console.seek(0)
                copy = console.read()
                if copy:  # floor and torchrun --redirects leave no console copy
                    bad += 4 * LINES - _console_lines(copy, self.prefix)
                return wall, bad
            finally:
                run.cleanup()

    def orphans(self) -> int:
        """Processes alive 1 s after the launcher was SIGKILLed (8 workers with a child each)."""
        run = self.launch("child", 8)
        try:
            found = wait_for_stamps(run.stamps, 8)
            assert run.proc is not None
            run.proc.send_signal(signal.SIGKILL)
            run.wait()
            time.sleep(1.0)
            return sum(alive(int(pid)) for s in found for pid in s[1:])
        finally:
            run.cleanup()

    def finish(self, run: Run) -> int:
        floor: Optional[Floor] = getattr(run, "floor", None)
        if floor is None:
            return run.wait()
        if run.mode == "fail":
            return floor.wait_fail_fast()
        return max(abs(p.wait()) for p in floor.procs)


# -- the table ------------------------------------------------------------------------------


def _good_lines(log: bytes) -> int:
    """Lines of one rank's log that are exactly ``rank R line I``, I counting up from 0."""
    lines = log.split(b"\n")[:-1]
    if not lines:
        return 0
    rank = lines[0].split(b" ")[1]
    expected = (b"rank %s line %d" % (rank, i) for i in range(len(lines)))
    return sum(1 for line, want in zip(lines, expected) if line == want)


def _console_lines(copy: bytes, prefix: Optional[Prefix]) -> int:
    """Console lines that are a whole ``rank R line I`` a worker wrote, behind exactly the
    prefix ``prefix`` gives for the ranks that wrote that text, each counted once. Every text
    here is written by one rank only (it names the rank), so the single form is the one
    expected, and a folded or another rank's prefix makes the line garbled. Without ``prefix``
    (a launcher whose console form this script does not know) any prefix passes."""
    seen = set()
    for line in copy.split(b"\n"):
        at = line.rfind(b"rank ")  # the default prefix "[rank R] " holds "rank " too
        match = BODY.fullmatch(line, at) if at >= 0 else None
        if match is None:
            continue
        rank, index = int(match[1]), int(match[2])
        if rank >= 4 or index >= LINES or match[0] != b"rank %d line %d" % (rank, index):
            continue  # not a line a worker wrote (leading zeros, a rank that does not exist)
        if prefix is None or line[:at] == prefix([rank]):
            seen.add(match[0])
    return len(seen)


def median(values: List[float]) -> float:
    return statistics.median(values)


def seconds(value: float) -> str:
    return f"{value:.3f} s"


def scenarios(reps: int, idle: float) -> Dict[str, Callable[[Bench], str]]:
    """Row label -> how to measure one cell (the median of ``reps`` runs)."""

    def rep(measure: Callable[[], float]) -> float:
        return median([measure() for _ in range(reps)])

    def with_code(measure: Callable[[], tuple[float, int]]) -> str:
        results = [measure() for _ in range(reps)]
        codes = sorted({code for _, code in results})
        return f"{seconds(median([t for t, _ in results]))} (exit {'/'.join(map(str, codes))})"

    def cpu(bench: Bench) -> str:
        results = [bench.cpu(idle) for _ in range(reps)]
        return (
            f"{seconds(median([r[0] for r in results]))} / {median([r[1] for r in results]):.4f} %"
        )

    def lines(bench: Bench) -> str:
        results = [bench.lines() for _ in range(reps)]
        return f"{seconds(median([r[0] for r in results]))}, lost {max(r[1] for r in results)}"

    return {
        "last of 8 workers started": lambda b: seconds(rep(lambda: b.started(8))),
        "last of 32 workers started": lambda b: seconds(rep(lambda: b.started(32))),
        "whole command, 8 trivial workers": lambda b: seconds(rep(b.whole)),
        "failing worker exit -> launcher exit": lambda b: with_code(b.fail_fast),
        "SIGTERM -> launcher exit": lambda b: with_code(lambda: b.stop("sleep", 5.0)),
        "escalation (SIGTERM ignored, grace 1 s)": lambda b: with_code(
            lambda: b.stop("ignore", 1.0)
        ),
        "launcher CPU: start-up / idle": cpu,
        "4 x 200,000 lines: wall, lines lost": lines,
        "orphans 1 s after SIGKILL of the launcher": lambda b: str(
            max(b.orphans() for _ in range(reps))
        ),
    }


GOALS = {
    "last of 8 workers started": "floor + 0.1 s",
    "last of 32 workers started": "",
    "whole command, 8 trivial workers": "<= 0.4 s",
    "failing worker exit -> launcher exit": "<= 0.1 s",
    "SIGTERM -> launcher exit": "<= 0.1 s",
    "escalation (SIGTERM ignored, grace 1 s)": "grace + 0.1 s",
    "launcher CPU: start-up / idle": "<= 0.15 s / <= 0.01 %",
    "4 x 200,000 lines: wall, lines lost": "<= 0.5 s, 0",
    "orphans 1 s after SIGKILL of the launcher": "0",
}
FLOOR_ROWS = {
    "last of 8 workers started",
    "last of 32 workers started",
    "whole command, 8 trivial workers",
    "failing worker exit -> launcher exit",
    "4 x 200,000 lines: wall, lines lost",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    beside = str(Path(sys.executable).with_name("torchrun"))  # the venv's own, if torch is in it
    parser.add_argument("--torchrun", default=os.environ.get("BENCH_TORCHRUN", beside))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--idle", type=float, default=3.0, help="idle CPU window, seconds")
    parser.add_argument(
        "--only",
        help="comma-separated launchers: floor,malaunch,malaunch dedup+prefix,"
        "malaunch --console-raw,supervise,torchrun",
    )
    parser.add_argument(
        "--rows", help="comma-separated texts: only the scenarios whose label holds one of them"
    )
    parser.add_argument(
        "--relay", action="store_true", help="only the console relay's throughput, in-process"
    )
    args = parser.parse_args()
    if args.relay:
        relay_table(args.reps)
        return
    workdir = Path(tempfile.mkdtemp(prefix="bench-supervisor-"))
    launchers: Dict[str, Optional[Argv]] = {
        "floor": None,
        "malaunch": malaunch_argv,
        "malaunch dedup+prefix": dedup_argv,
        "malaunch --console-raw": raw_argv,
        "supervise()": driver_argv,
    }
    prefixes: Dict[str, Prefix] = {
        "malaunch": default_prefix,
        "malaunch --console-raw": default_prefix,
        "malaunch dedup+prefix": dedup_prefix,
        "supervise()": default_prefix,
    }
    notes = []
    # Resolved now: the launchers run in a work directory, where a relative path means nothing.
    torchrun = shutil.which(args.torchrun)
    if torchrun is not None:
        launchers["torchrun"] = torchrun_argv(str(Path(torchrun).absolute()))
    else:
        notes.append(f"torchrun columns skipped: {args.torchrun} not found (--torchrun PATH)")
    if args.only:
        wanted = {name.strip() for name in args.only.split(",")}
        launchers = {k: v for k, v in launchers.items() if k.rstrip("()") in wanted}
    rows = scenarios(args.reps, args.idle)
    if args.rows:
        texts = [text.strip() for text in args.rows.split(",")]
        rows = {label: how for label, how in rows.items() if any(t in label for t in texts)}
    table: Dict[str, Dict[str, str]] = {row: {} for row in rows}
    try:
        for name, argv in launchers.items():
            bench = Bench(workdir, argv, prefixes.get(name))
            for row, measure in rows.items():
                if argv is None and row not in FLOOR_ROWS:
                    table[row][name] = "n/a"
                    continue
                print(f"... {name}: {row}", file=sys.stderr, flush=True)
                table[row][name] = measure(bench)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print_table(table, list(launchers), notes, args.reps)


# -- the console relay alone ---------------------------------------------------------------

RELAY_TEXTS = {
    "plain ASCII": b"rank 3 step 1234 loss=2.3456 lr=0.001 throughput=1234.5 samples/s\n",
    "CJK (UTF-8)": "第 1234 步 损失 2.3456 学习率 0.001 吞吐 1234.5 样本每秒\n".encode(),
    "coloured (SGR)": b"\x1b[32mINFO\x1b[0m rank 3 step 1234 \x1b[1mloss=2.3456\x1b[0m lr=0.001\n",
    "progress bar (\\r)": b" 10%|#         | 10/100\r 50%|#####     | 50/100\r100%|#####|\n",
    "hostile (OSC, C1)": b"\x1b]0;title\x07 step 1234 \x9b2J loss \x1b]52;c;aGk=\x07 x\n",
}
RELAY_BYTES = 32 << 20  # fed in the launcher's 64 KiB reads, cut anywhere in a line


def relay_seconds(text: bytes, escape: bool) -> float:
    """Seconds for one LineRelay to prefix (and escape) RELAY_BYTES of ``text`` lines."""
    from malaunch.supervisor.output import LineRelay  # noqa: PLC0415 (only this mode)

    data = text * (RELAY_BYTES // len(text))
    chunks = [data[i : i + (1 << 16)] for i in range(0, len(data), 1 << 16)]
    written = [0]

    def sink(block: bytes) -> None:
        written[0] += len(block)

    relay = LineRelay(b"[rank 3] ", sink, escape=escape)
    start = time.perf_counter()
    for chunk in chunks:
        relay.feed(chunk)
    relay.flush()
    return time.perf_counter() - start


def relay_table(reps: int) -> None:
    """MB/s of a rank's output through the console relay, escaped (the default) and raw
    (--console-raw: the relay as it was before escaping existed), median of ``reps``."""
    print(f"| output (32 MiB, median of {reps}) | escaped (default) | --console-raw | ratio |")
    print("|---|---|---|---|")
    for name, text in RELAY_TEXTS.items():
        rates = []
        for escape in (True, False):
            best = median([relay_seconds(text, escape) for _ in range(reps)])
            rates.append(RELAY_BYTES / best / 1e6)
        print(f"| {name} | {rates[0]:,.0f} MB/s | {rates[1]:,.0f} MB/s | "
              f"{rates[1] / rates[0]:.1f}x |")  # fmt: skip
    print(f"\nPython {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}.")


def print_table(
    table: Dict[str, Dict[str, str]], names: List[str], notes: List[str], reps: int
) -> None:
    print(f"| scenario (median of {reps}) | " + " | ".join(names) + " | goal |")
    print("|---" * (len(names) + 2) + "|")
    for row, cells in table.items():
        print(f"| {row} | " + " | ".join(cells.get(n, "") for n in names) + f" | {GOALS[row]} |")
    for note in notes:
        print(f"\n{note}")
    print(
        f"\nPython {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f} at the end."
    )


if __name__ == "__main__":
    main()
