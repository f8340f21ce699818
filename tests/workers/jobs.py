"""Test helpers shared by the supervisor tests: hand-built plans of real tiny workers, and
checks that processes are gone, by pid (never by name).

Every worker writes its pid and its children's pids to ``<pid dir>/<name>.pids`` (see
``worker.py``), so a test can check afterwards that not one of them is still alive.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Optional, Set

from malaunch.job.restart import RestartPolicy
from malaunch.models import LaunchPlan, Node, ProcessSpec, Topology
from malaunch.supervisor.supervise import SuperviseOptions, supervise
from malaunch.testing import pid_alive

WORKERS = Path(__file__).resolve().parent
WORKER = WORKERS / "worker.py"
DRIVER = WORKERS / "driver.py"

# One definition of "still running" for every test.
alive = pid_alive


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Poll ``predicate`` (tests may poll; the supervisor may not) or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def topology() -> Topology:
    return Topology(
        source="local",
        nodes=(Node(index=0, host="127.0.0.1"),),
        node_rank=0,
        master_addr="127.0.0.1",
    )


class Job:
    """A temporary job directory: plans of workers, their pids, logs and console copy."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log_dir = root / "logs"
        self.pid_dir = root / "pids"
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        self.console = bytearray()

    def spec(
        self,
        rank: Optional[int],
        *args: str,
        role: str = "worker",
        service: bool = False,
        env: Optional[Dict[str, str]] = None,
        argv: Optional[Iterable[str]] = None,
    ) -> ProcessSpec:
        """A worker.py process (or ``argv``); its pid file is ``rank<N>``, ``<role><N>`` or
        ``<role>.pids``."""
        if role == "worker" and rank is not None:
            name = {"RANK": str(rank)}
        else:  # ps 0 -> "ps0", scheduler -> "scheduler"
            name = {"WORKER_NAME": role if rank is None else f"{role}{rank}"}
        command = [sys.executable, "-S", str(WORKER), "--pid-dir", str(self.pid_dir), *args]
        return ProcessSpec(
            role=role,
            rank=rank,
            local_rank=rank,
            argv=tuple(argv if argv is not None else command),
            env={**name, **(env or {})},
            cwd=str(self.root / "cwd"),
            log_file=str(self.log_dir / f"{role}-{rank}.log"),
            service=service,
        )

    def plan(self, *specs: ProcessSpec) -> LaunchPlan:
        return LaunchPlan(framework="test", topology=topology(), processes=tuple(specs))

    def options(self, **fields: Any) -> SuperviseOptions:
        if "max_restarts" in fields:  # restarts at once: back-off is tested on its own
            fields["restart"] = RestartPolicy(
                max_restarts=fields.pop("max_restarts"), backoff=(0, 0)
            )
        fields.setdefault("log_dir", str(self.log_dir))
        fields.setdefault("grace_period", 5.0)
        fields.setdefault("console", self.console.extend)
        return SuperviseOptions(**fields)

    def run(self, plan: LaunchPlan, **fields: Any) -> int:
        """supervise() in this process, the console copy collected in ``self.console``."""
        return supervise(plan, self.options(**fields))

    def pids(self) -> Set[int]:
        """Every pid the workers reported, plus the pids in the summary."""
        found: Set[int] = set()
        for path in self.pid_dir.glob("*.pids"):
            found.update(int(line) for line in path.read_text().split())
        summary = self.log_dir / "malaunch-summary.json"
        if summary.exists():
            found.update(p["pid"] for p in self.summary()["processes"])
        return found

    def pid_files(self) -> int:
        # A worker creates its file and then writes its pids in one write: an empty file is a
        # worker that has not finished starting (its child's pid not yet recorded).
        return sum(1 for path in self.pid_dir.glob("*.pids") if path.stat().st_size)

    def wait_started(self, count: int) -> None:
        wait_until(lambda: self.pid_files() >= count, f"{count} workers to start")

    def assert_all_gone(self, expected_at_least: int = 1) -> None:
        """No process the job started is alive (within the ~1 s the contract allows)."""
        pids = self.pids()
        assert len(pids) >= expected_at_least, f"only {len(pids)} pids recorded"
        wait_until(lambda: not any(alive(pid) for pid in pids), "every process to be gone", 3.0)

    def summary(self) -> Dict[str, Any]:
        data: Dict[str, Any] = json.loads((self.log_dir / "malaunch-summary.json").read_text())
        return data

    def log(self, spec: ProcessSpec) -> bytes:
        return Path(spec.log_file).read_bytes()

    def signal_after_start(self, count: int, *signums: int, pause: float = 0.2) -> threading.Thread:
        """From a helper thread: once ``count`` workers have started, signal this process."""

        def send() -> None:
            self.wait_started(count)
            for signum in signums:
                os.kill(os.getpid(), signum)
                time.sleep(pause)

        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        return thread

    def start_driver(self, plan: LaunchPlan, **fields: Any) -> subprocess.Popen[str]:
        """supervise() in a child process (for signals to the launcher), stderr piped."""
        fields.setdefault("log_dir", str(self.log_dir))
        fields.setdefault("grace_period", 5.0)
        plan_file, options_file = self.root / "plan.json", self.root / "options.json"
        plan_file.write_text(plan.model_dump_json())
        options_file.write_text(json.dumps(fields))
        driver = subprocess.Popen(
            [sys.executable, str(DRIVER), str(plan_file), str(options_file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert driver.stderr is not None
        assert driver.stderr.readline() == "ready\n"
        return driver


def kill_quietly(proc: subprocess.Popen[Any]) -> None:
    """Clean-up for a failed test: never leave a driver behind."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
