"""The supervisor through the installed command:
``malaunch --framework torch_ddp --topology local --nproc-per-node N -- python worker.py``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Set

import pytest

from malaunch.testing import clean_env, malaunch_executable, run_cli, run_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workers"))
from jobs import WORKER, alive, wait_until


def command(tmp_path: Path, nproc: int, *worker_args: str) -> List[str]:
    (tmp_path / "pids").mkdir(exist_ok=True)
    return [
        "--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", str(nproc),
        "--log-dir", str(tmp_path / "logs"), "--grace-period", "5", "--",
        sys.executable, "-S", str(WORKER), "--pid-dir", str(tmp_path / "pids"), *worker_args,
    ]  # fmt: skip


def summary(tmp_path: Path) -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads(
        (run_dir(tmp_path / "logs") / "malaunch-summary.json").read_text()
    )
    return data


def pids(tmp_path: Path) -> Set[int]:
    found = {int(p) for f in (tmp_path / "pids").glob("*.pids") for p in f.read_text().split()}
    if (run_dir(tmp_path / "logs") / "malaunch-summary.json").exists():
        found.update(p["pid"] for p in summary(tmp_path)["processes"])
    return found


def assert_all_gone(tmp_path: Path, at_least: int) -> None:
    found = pids(tmp_path)
    assert len(found) >= at_least
    wait_until(lambda: not any(alive(pid) for pid in found), "every process to be gone", 3.0)


def started(tmp_path: Path, count: int, launcher: subprocess.Popen[Any]) -> None:
    """Wait for the workers' pid files; fail at once (with its messages) if malaunch ended."""

    def ready() -> bool:
        if launcher.poll() is not None:
            _, stderr = launcher.communicate()
            raise AssertionError(f"malaunch ended early ({launcher.returncode}): {stderr}")
        return len(list((tmp_path / "pids").glob("*.pids"))) >= count

    wait_until(ready, "the workers")


def test_success_prefixes_and_summary(tmp_path: Path) -> None:
    result = run_cli(command(tmp_path, 4, "--lines", "2", "--child"))
    assert result.code == 0, result.stderr
    for rank in range(4):
        assert f"[rank {rank}] rank{rank} line 1\n" in result.stdout
    assert "summary: exit code 0" in result.stderr
    processes = summary(tmp_path)["processes"]
    assert [(p["rank"], p["exit_code"]) for p in processes] == [(r, 0) for r in range(4)]
    assert_all_gone(tmp_path, at_least=8)


def test_first_failure_code_is_the_exit_code(tmp_path: Path) -> None:
    everyone = [str(tmp_path / "pids" / f"rank{rank}.pids") for rank in range(4)]
    args = command(tmp_path, 4, "--child", "--fail-rank", "2", "--wait-files", *everyone)
    result = run_cli([*args, "--exit", "3"])
    assert result.code == 3, result.stderr
    assert "rank 2 (pid" in result.stderr and "exited with code 3" in result.stderr
    assert summary(tmp_path)["first_failure"]["rank"] == 2
    assert_all_gone(tmp_path, at_least=8)


def test_signal_death_gives_128_plus_n(tmp_path: Path) -> None:
    result = run_cli(command(tmp_path, 2, "--fail-rank", "1", "--kill-self", "SIGKILL"))
    assert result.code == 137, result.stderr
    assert_all_gone(tmp_path, at_least=2)


def test_console_ranks_and_restarts(tmp_path: Path) -> None:
    done = [str(tmp_path / f"done{rank}-{{restart}}") for rank in range(3)]
    args = command(tmp_path, 3, "--lines", "1", "--fail-before", "1", "--wait-files", *done)
    args += ["--done-file", str(tmp_path / "done{rank}-{restart}")]
    args[args.index("--") : args.index("--")] = ["--console-ranks", "1", "--max-restarts", "1"]
    result = run_cli(args)
    assert result.code == 0, result.stderr
    # Attempt 0 printed and failed, attempt 1 printed and succeeded; only rank 1 is echoed.
    assert result.stdout == "[rank 1] rank1 line 0\n" * 2
    assert summary(tmp_path)["restarts"] == 1


def test_unstartable_command_is_71(tmp_path: Path) -> None:
    args = [*command(tmp_path, 2)[: command(tmp_path, 2).index("--") + 1], "/nonexistent/prog"]
    result = run_cli(args)
    assert result.code == 71
    assert "malaunch: error: cannot start rank 0: '/nonexistent/prog'" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_launcher_signal(tmp_path: Path, signum: int) -> None:
    launcher = subprocess.Popen(
        [malaunch_executable(), *command(tmp_path, 4, "--sleep", "60", "--child")],
        env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        started(tmp_path, 4, launcher)
        launcher.send_signal(signum)
        _, stderr = launcher.communicate(timeout=30)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.communicate()
    assert launcher.returncode == 128 + signum, stderr
    assert_all_gone(tmp_path, at_least=8)


def test_sigkilled_launcher_leaves_nothing(tmp_path: Path) -> None:
    launcher = subprocess.Popen(
        [malaunch_executable(), *command(tmp_path, 4, "--sleep", "60", "--child")],
        env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        started(tmp_path, 4, launcher)
        launcher.kill()
        launcher.wait(timeout=10)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert_all_gone(tmp_path, at_least=8)
