"""What got in a new user's way: a silent wait, an error buried under an empty table, a typo
of a subcommand run as a job, old node folders mixed with a new simulation."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from malaunch.testing import clean_env, run_cli, run_dir


def test_waiting_for_a_rank_table_says_what_and_how_long(tmp_path: Path) -> None:
    env = clean_env({"RANK_TABLE_FILE": str(tmp_path / "nope" / "hccl.json")})
    args = ["--framework", "mindspore", "--wait-timeout", "3", "--", "python", "t.py"]
    result = run_cli(args, env=env, cwd=tmp_path)
    assert result.code == 69
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"malaunch: info: waiting for rank table {tmp_path}/nope/hccl.json (from "
        "RANK_TABLE_FILE): 2s of 3 (the file does not exist)"
    )
    assert lines[-1].startswith("malaunch: error: rank table")


def test_a_program_that_cannot_start_is_one_error_line(tmp_path: Path) -> None:
    result = run_cli(["--framework", "torch_ddp", "--", str(tmp_path / "missing")], cwd=tmp_path)
    assert result.code == 71
    assert result.stderr == (
        f"malaunch: error: cannot start rank 0: '{tmp_path}/missing': No such file or directory\n"
    )


@pytest.mark.parametrize(
    ("word", "meant"), [("topologyy", "topology"), ("plugin", "plugins"), ("simulat", "simulate")]
)
def test_a_mistyped_subcommand_gets_did_you_mean(tmp_path: Path, word: str, meant: str) -> None:
    # With MALAUNCH_FRAMEWORK set, the typo used to be started as the job's program.
    env = clean_env({"MALAUNCH_FRAMEWORK": "torch_ddp"})
    result = run_cli([word], env=env, cwd=tmp_path)
    assert result.code == 64
    assert result.stderr == (
        f"malaunch: error: unknown command {word!r}: did you mean `malaunch {meant}`? (a job's "
        "own command goes after the options and --)\n"
    )


def test_a_smaller_simulation_has_its_own_nodes_and_keeps_the_larger_one(tmp_path: Path) -> None:
    logs = tmp_path / "logs"

    def simulate(nodes: int) -> Path:
        args = ["simulate", "--nodes", str(nodes), "--platform", "volcano"]
        args += ["--framework", "torch_ddp", "--log-dir", str(logs)]
        args += ["--", sys.executable, "-c", "print(1)"]
        result = run_cli(args, cwd=tmp_path)
        assert result.code == 0, result.stderr
        return run_dir(logs)

    larger = simulate(3)
    assert sorted(p.name for p in larger.glob("node-*")) == [
        "node-0", "node-0.log", "node-1", "node-1.log", "node-2", "node-2.log",
    ]  # fmt: skip
    (larger / "node-1" / "notes.txt").write_text("the user's own file\n")
    smaller = simulate(2)
    assert smaller != larger
    assert sorted(p.name for p in smaller.glob("node-*")) == [
        "node-0", "node-0.log", "node-1", "node-1.log",
    ]  # fmt: skip
    # The earlier, larger run is kept whole, the user's file with it.
    assert sorted(p.name for p in larger.glob("node-*")) == [
        "node-0", "node-0.log", "node-1", "node-1.log", "node-2", "node-2.log",
    ]  # fmt: skip
    assert (larger / "node-1" / "notes.txt").read_text() == "the user's own file\n"


def test_a_run_after_a_simulation_is_read_alone(tmp_path: Path) -> None:
    # logs and report read node-<k>/ as the nodes of the run: a plain launch reusing the log
    # dir of a simulation used to be reported with the simulation's nodes.
    logs = tmp_path / "logs"
    command = ["--", sys.executable, "-c", "print('hello')"]
    simulate = ["simulate", "--nodes", "2", "--platform", "volcano", "--framework", "torch_ddp"]
    result = run_cli([*simulate, "--log-dir", str(logs), *command], cwd=tmp_path)
    assert result.code == 0, result.stderr
    simulation = run_dir(logs)
    launch = ["--framework", "torch_ddp", "--log-dir", str(logs), *command]
    result = run_cli(launch, env=clean_env(), cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert run_dir(logs) != simulation and (simulation / "node-1").is_dir()
    report = run_cli(["logs", str(logs)], cwd=tmp_path)
    assert report.code == 0, report.stderr
    assert report.stdout == "[node 0 rank 0] hello\n"


def test_the_help_lists_every_tool_command() -> None:
    result = run_cli(["--help"])
    assert result.code == 0
    others = result.stdout.split("Other commands", 1)[1]
    for command in ("plugins", "topology", "ranktable validate", "ranktable convert",
                    "ranktable generate", "simulate", "render", "logs", "report"):  # fmt: skip
        assert f"malaunch {command}" in others, command


def test_the_torch_extra_cannot_pull_a_cuda_build_and_brings_numpy() -> None:
    # On a Python without the CPU wheel pip would fetch a CUDA build of several GB: the pin
    # carries a marker, and numpy comes with it (torch warns four times without it).
    requires = metadata.requires("malaunch") or []
    torch = [r for r in requires if r.startswith("torch") and 'extra == "torch"' in r]
    assert torch == ['torch==2.13.0; python_version == "3.11" and extra == "torch"']
    assert 'numpy<2; extra == "torch"' in requires


def test_bench_supervisor_with_a_torchrun_that_is_not_there(tmp_path: Path) -> None:
    """A relative or missing --torchrun leaves its column out with a note, no traceback."""
    bench = Path(__file__).parents[2] / "benchmarks" / "bench_supervisor.py"
    args = [sys.executable, str(bench), "--torchrun", "venv/bin/torchrun", "--only", "floor"]
    args += ["--rows", "whole command", "--reps", "1"]
    result = subprocess.run(
        args, check=False, capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    note = "torchrun columns skipped: venv/bin/torchrun not found (--torchrun PATH)"
    assert note in result.stdout
