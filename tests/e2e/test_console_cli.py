"""Console options through the installed command: --console-prefix and --console-dedup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, List, Tuple

import pytest

from malaunch.testing import clean_env, malaunch_executable, run_cli, run_dir

# Every rank waits until all have started, so a line they all print reaches the launcher
# within one dedup window (0.2 s) even when the machine is slow to start four interpreters.
SCRIPT = """\
import os, pathlib, sys, time
barrier, world, rank = pathlib.Path(sys.argv[1]), int(sys.argv[2]), os.environ["RANK"]
barrier.mkdir(exist_ok=True)
(barrier / rank).touch()
deadline = time.monotonic() + 30
while len(list(barrier.iterdir())) < world and time.monotonic() < deadline:
    time.sleep(0.01)
print("epoch 1 done", flush=True)
print("rank", rank, flush=True)
if rank != "2":
    print("not rank 2", flush=True)
"""

TEMPLATE = "[{node}/{host} r{rank} l{local_rank} {role}] "


def command(tmp_path: Path, world: int) -> List[str]:
    return [sys.executable, "-c", SCRIPT, str(tmp_path / "barrier"), str(world)]


def launch(tmp_path: Path, *options: str) -> str:
    args = ["--framework", "torch_ddp", "--topology", "local", "--nproc-per-node", "4"]
    args += ["--log-dir", str(tmp_path / "logs"), *options, "--", *command(tmp_path, 4)]
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    return result.stdout


def test_dedup_folds_the_console_and_keeps_every_log_line(tmp_path: Path) -> None:
    out = launch(tmp_path, "--console-dedup").splitlines()
    assert sorted(out) == sorted(
        ["[ranks 0-3] epoch 1 done", "[ranks 0-1,3] not rank 2"]
        + [f"[rank {r}] rank {r}" for r in range(4)]
    )
    for rank in range(4):
        log = (run_dir(tmp_path / "logs") / f"worker-{rank}.log").read_text()
        assert log == f"epoch 1 done\nrank {rank}\n" + ("not rank 2\n" if rank != 2 else "")


def test_dedup_with_a_prefix_template_keeps_each_ranks_prefix_and_folds_truthfully(
    tmp_path: Path,
) -> None:
    out = launch(tmp_path, "--console-dedup", "--console-prefix", TEMPLATE).splitlines()
    # A line of one rank: its own prefix, exactly as without dedup. A folded line: the same
    # template, with the span of the ranks (and local ranks) that printed it.
    assert sorted(out) == sorted(
        [
            "[0/127.0.0.1 r0-3 l0-3 worker] epoch 1 done",
            "[0/127.0.0.1 r0-1,3 l0-1,3 worker] not rank 2",
        ]
        + [f"[0/127.0.0.1 r{r} l{r} worker] rank {r}" for r in range(4)]
    )


def test_dedup_with_a_prefix_template_names_each_node_under_simulate(tmp_path: Path) -> None:
    args = ["simulate", "--nodes", "2", "--nproc-per-node", "2", "--platform", "octopus"]
    args += ["--framework", "torch_ddp", "--log-dir", str(tmp_path / "logs"), "--console-dedup"]
    args += ["--console-prefix", TEMPLATE, "--", *command(tmp_path, 4)]
    result = run_cli(args, cwd=tmp_path)
    assert result.code == 0, result.stderr
    ranks = [line for line in result.stdout.splitlines() if "malaunch: " not in line]
    # Each node folds its own ranks' lines; simulate puts [node K] before each node's output.
    assert sorted(ranks) == sorted(
        [
            "[node 0] [0/127.0.0.1 r0-1 l0-1 worker] epoch 1 done",
            "[node 0] [0/127.0.0.1 r0 l0 worker] rank 0",
            "[node 0] [0/127.0.0.1 r1 l1 worker] rank 1",
            "[node 0] [0/127.0.0.1 r0-1 l0-1 worker] not rank 2",
            "[node 1] [1/127.0.0.2 r2-3 l0-1 worker] epoch 1 done",
            "[node 1] [1/127.0.0.2 r2 l0 worker] rank 2",
            "[node 1] [1/127.0.0.2 r3 l1 worker] rank 3",
            "[node 1] [1/127.0.0.2 r3 l1 worker] not rank 2",
        ]
    )


def test_prefix_template_carries_node_host_rank_and_role(tmp_path: Path) -> None:
    out = launch(tmp_path, "--console-prefix", "<{node}|{host}|{rank}|{local_rank}|{role}> ")
    for rank in range(4):
        assert f"<0|127.0.0.1|{rank}|{rank}|worker> epoch 1 done" in out


def test_an_unknown_prefix_field_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli(
        ["--framework", "torch_ddp", "--console-prefix", "[{gpu}] ", "--", "true"], cwd=tmp_path
    )
    assert result.code == 64
    assert result.stderr == (
        "malaunch: error: --console-prefix '[{gpu}] ': unknown field {gpu} "
        "(known: {node}, {host}, {rank}, {local_rank}, {role})\n"
    )


def _closed(*fds: int) -> Callable[[], None]:
    def close() -> None:
        for fd in fds:
            os.close(fd)

    return close


def _run_closed(tmp_path: Path, args: List[str], *fds: int) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [malaunch_executable(), *args],
        env=clean_env(),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=None if 1 in fds else subprocess.PIPE,
        stderr=None if 2 in fds else subprocess.PIPE,
        preexec_fn=_closed(*fds),
        timeout=60,
        check=False,
    )


PRINTS = "for i in range(2000): print('line', i)"


@pytest.mark.parametrize("fds", [(1,), (2,), (1, 2), (0, 1, 2)])
def test_closed_standard_streams_keep_the_jobs_code_and_logs(
    tmp_path: Path, fds: Tuple[int, ...]
) -> None:
    # `malaunch ... >&-`: the launcher crashed at exit (sys.stdout is None), exit 1.
    args = ["--framework", "torch_ddp", "--nproc-per-node", "2", "--log-dir", "logs", "--"]
    result = _run_closed(tmp_path, [*args, sys.executable, "-c", PRINTS], *fds)
    assert result.returncode == 0
    run = run_dir(tmp_path / "logs")
    for rank in (0, 1):
        assert (run / f"worker-{rank}.log").read_text().count("line ") == 2000
    assert json.loads((run / "malaunch-summary.json").read_text())["exit_code"] == 0
    args = ["--framework", "torch_ddp", "--log-dir", "failed", "--"]
    result = _run_closed(tmp_path, [*args, sys.executable, "-c", PRINTS + "\nexit(3)"], *fds)
    assert result.returncode == 3


def test_closed_standard_streams_keep_a_usage_errors_code(tmp_path: Path) -> None:
    result = _run_closed(tmp_path, ["--framework", "torch_ddp", "--nproc-per-node", "x"], 1, 2)
    assert result.returncode == 64
